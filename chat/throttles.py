from collections.abc import Sequence
from typing import Any

from rest_framework.request import Request

from chat.interface.views.base import ChatInterfaceViewSet
from chat.models import ChatConnection
from chat.principals import ChatPrincipal, SignedKeyHolder
from platform_site.api.rate_limit import Policy
from platform_site.api.rate_limit_policies import bot_rate_limits
from platform_site.api.throttling import RateLimitThrottle, client_address

# The window of the per-bot ceiling on chat users made.
HOUR = 3600


def chat_policies(
    *, bot_id: str, remote_addr: str, chat_user_id: str | None, creates_user: bool = False
) -> list[Policy]:
    """Every chat request counts against its client address, and one with a
    user key against its chat user too, at the limits of the bot's workspace.
    One that may make a chat user counts against the users made from its
    address and the users made for its bot as well: a client needs no
    credential to make one, so the rows a bot gains are bounded here."""
    limits = bot_rate_limits(bot_id)
    if limits is None:  # the bot went away meanwhile
        return []
    address = client_address(remote_addr)
    policies = [
        Policy(
            "address",
            f"chat-address:{limits.workspace_id}:{address}",
            limits.chat_address_per_minute,
        )
    ]
    if chat_user_id is not None:
        policies.append(
            Policy("user", f"chat-user:{bot_id}:{chat_user_id}", limits.chat_user_per_minute)
        )
    if creates_user:
        policies += [
            Policy(
                "address-new-users",
                f"chat-address-new-users:{limits.workspace_id}:{address}",
                limits.chat_address_user_creations_per_minute,
            ),
            Policy(
                "bot-new-users",
                f"chat-new-users:{bot_id}",
                limits.chat_user_creations_per_hour,
                window=HOUR,
            ),
        ]
    return policies


class ChatRateLimit(RateLimitThrottle):
    """The chat interface's routes (the live stream and the webchat's
    initialize count in chat/live/)."""

    def policies(self, request: Request, view: Any) -> Sequence[Policy]:
        connection = getattr(request, "chat_connection", None)
        if not isinstance(connection, ChatConnection) or not isinstance(view, ChatInterfaceViewSet):
            return ()
        principal = request.auth
        chat_user_id = None
        if isinstance(principal, ChatPrincipal):
            chat_user_id = principal.user.chat_id
        elif isinstance(principal, SignedKeyHolder):
            chat_user_id = principal.chat_user_id
        return chat_policies(
            bot_id=connection.bot_id,
            remote_addr=request.META.get("REMOTE_ADDR", ""),
            chat_user_id=chat_user_id,
            creates_user=view.creates_chat_user(request),
        )
