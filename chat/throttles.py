from collections.abc import Sequence
from typing import Any

from rest_framework.request import Request

from bots.rate_limits import bot_rate_limits
from chat.models import ChatConnection
from chat.principals import ChatPrincipal, SignedKeyHolder
from platform_site.api.rate_limit import Policy
from platform_site.api.throttling import RateLimitThrottle, client_address


def chat_policies(*, bot_id: str, remote_addr: str, chat_user_id: str | None) -> list[Policy]:
    """Every chat request counts against its client address, and one with a
    user key against its chat user too, at the limits of the bot's workspace."""
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
    return policies


class ChatRateLimit(RateLimitThrottle):
    """The chat interface's routes (the live stream counts in chat/live/access.py)."""

    def policies(self, request: Request, view: Any) -> Sequence[Policy]:
        connection = getattr(request, "chat_connection", None)
        if not isinstance(connection, ChatConnection):
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
        )
