from .bot import Bot, Integration, IntegrationInstallation, Workflow
from .conversation import Conversation, Message, Participant, User
from .token import AccessToken
from .workspace import Membership, Role, Workspace

__all__ = [
    "AccessToken",
    "Bot",
    "Conversation",
    "Integration",
    "IntegrationInstallation",
    "Membership",
    "Message",
    "Participant",
    "Role",
    "User",
    "Workflow",
    "Workspace",
]
