from .audit import AppendOnlyError, AuditAction, AuditRecord
from .bot import Bot, DeliveryFormat, Integration, IntegrationInstallation, Workflow
from .conversation import Conversation, Message, Participant, User
from .idempotency import IdempotencyKey
from .token import AccessToken
from .workspace import Membership, Role, Workspace
from .workspace_settings import WorkspaceSettings

__all__ = [
    "AccessToken",
    "AppendOnlyError",
    "AuditAction",
    "AuditRecord",
    "Bot",
    "Conversation",
    "DeliveryFormat",
    "IdempotencyKey",
    "Integration",
    "IntegrationInstallation",
    "Membership",
    "Message",
    "Participant",
    "Role",
    "User",
    "Workflow",
    "Workspace",
    "WorkspaceSettings",
]
