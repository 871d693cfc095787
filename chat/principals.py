from dataclasses import dataclass

from rest_framework.request import Request

from bots.models import User
from chat.models import ChatConnection


@dataclass(frozen=True)
class ChatPrincipal:
    connection: ChatConnection
    user: User


def chat_principal(request: Request) -> ChatPrincipal:
    """The caller of a view guarded by UserKeyAuthentication and IsChatUser."""
    principal = request.auth
    if not isinstance(principal, ChatPrincipal):
        raise TypeError("the view is not guarded by UserKeyAuthentication")
    return principal
