"""Who calls the chat interface, as its authenticators establish it (`request.auth`)."""

from dataclasses import dataclass

from rest_framework.request import Request

from bots.models import User
from chat.models import ChatConnection


@dataclass(frozen=True)
class ChatPrincipal:
    """The holder of a key naming an existing user of the connection's bot."""

    connection: ChatConnection
    user: User

    @property
    def idempotency_scope(self) -> str:
        """Whose Idempotency-Keys these are (platform_site/api/idempotency.py): the user's,
        as SignedKeyHolder's for the same key."""
        return f"chat:{self.connection.webhook_id}:{self.user.chat_id}"


@dataclass(frozen=True)
class SignedKeyHolder:
    """The holder of a validly signed key, whose user may not exist yet."""

    connection: ChatConnection
    chat_user_id: str

    @property
    def idempotency_scope(self) -> str:
        return f"chat:{self.connection.webhook_id}:{self.chat_user_id}"


@dataclass(frozen=True)
class ChatAdmin:
    """The holder of the connection's admin secret (`x-admin-secret`): its
    encryption key, with which they could sign any user's key themselves."""

    connection: ChatConnection

    @property
    def idempotency_scope(self) -> str:
        return f"chat-admin:{self.connection.webhook_id}"


def chat_connection(request: Request) -> ChatConnection:
    """The connection the URL names (ChatInterfaceViewSet finds it before anything else)."""
    connection = getattr(request, "chat_connection", None)
    if not isinstance(connection, ChatConnection):
        raise TypeError("the view is not a ChatInterfaceViewSet")
    return connection


def chat_client_scope(request: Request) -> str:
    """Whose Idempotency-Keys a caller without a key uses (POST /users): the
    client address's, so that nobody elsewhere can replay the key (and user
    key) another client was given."""
    address = request.META.get("REMOTE_ADDR", "")
    return f"chat-client:{chat_connection(request).webhook_id}:{address}"


def chat_principal(request: Request) -> ChatPrincipal:
    """The caller of a view guarded by UserKeyAuthentication and IsChatUser."""
    principal = request.auth
    if not isinstance(principal, ChatPrincipal):
        raise TypeError("the view is not guarded by UserKeyAuthentication")
    return principal


def chat_admin(request: Request) -> ChatAdmin:
    """The caller of a view guarded by AdminSecretAuthentication and IsChatAdmin."""
    admin = request.auth
    if not isinstance(admin, ChatAdmin):
        raise TypeError("the view is not guarded by AdminSecretAuthentication")
    return admin


def signed_key_holder(request: Request) -> SignedKeyHolder:
    """The caller of a view guarded by SignedUserKeyAuthentication and HoldsSignedKey."""
    holder = request.auth
    if not isinstance(holder, SignedKeyHolder):
        raise TypeError("the view is not guarded by SignedUserKeyAuthentication")
    return holder
