"""Who may listen to a conversation: a participant, by the `x-user-key` of
the chat connection that the URL names. Checked in the order of the other chat
routes: unknown webhook 404, wrong method 405, key 401, conversation id 400,
unknown conversation 404, not a participant 403. What refuses the request
itself (webhook, method, key, rate) is the API's error; what refuses the
conversation, the domain's, as the chat interface's selectors refuse it."""

from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db.models import F
from django.http import StreamingHttpResponse

from bots.models import Conversation, User
from chat.authentication import USER_KEY_CHALLENGE
from chat.keys import InvalidUserKey, is_chat_id, user_key_read
from chat.live.stream import PING, listener_stream
from chat.live.subscriptions import Subscription
from chat.models import ChatConnection
from chat.selectors.participants import not_a_participant, takes_part
from chat.throttles import chat_policies
from platform_site.api.database import database_release
from platform_site.api.errors import MethodNotFound, RateLimited, ResourceNotFound, Unauthorized
from platform_site.api.rate_limit import Decision, rate_limit_headers, rate_limit_hit
from platform_site.foundation.domain_errors import MalformedId, NotFound


@dataclass(frozen=True)
class Listener:
    conversation_id: str  # the runtime id, which names the channel
    participant_id: str  # the chat id of the key's user: their removal ends the stream
    workspace_id: str  # whose listeners the metrics count it among
    rate_limit: Decision | None = None  # where the request left its rate limits


async def listener_admit(
    *,
    webhook_id: str,
    method: str,
    key: str | None,
    conversation_chat_id: str,
    remote_addr: str,
) -> Listener:
    """The listener a request stands for, or the error that refuses it."""
    try:
        chat, workspace_id = await sync_to_async(stream_chat)(
            webhook_id=webhook_id, method=method, route="the live stream"
        )
        user = await sync_to_async(key_user)(chat=chat, key=key)
        # Counted where the other chat routes count: once the key is known good.
        rate_limit = await sync_to_async(rate_limit_check)(
            bot_id=chat.bot_id, remote_addr=remote_addr, chat_user_id=user.chat_id
        )
        if not is_chat_id(conversation_chat_id):
            raise MalformedId(f"{conversation_chat_id[:80]!r} is not a conversation id")
        conversation = await (
            Conversation.objects.filter(bot_id=chat.bot_id, chat_id=conversation_chat_id)
            .annotate(is_participant=takes_part(user))
            .only("id")
            .afirst()
        )
        if conversation is None:
            raise NotFound(f"Conversation {conversation_chat_id!r} not found")
        if not conversation.is_participant:
            raise not_a_participant(conversation_chat_id)
        return Listener(
            conversation_id=conversation.id,
            participant_id=user.chat_id,
            workspace_id=workspace_id,
            rate_limit=rate_limit,
        )
    finally:
        # A stream outlives its lookups by hours: listeners hold no connection.
        await sync_to_async(database_release)()


def rate_limit_check(
    *, bot_id: str, remote_addr: str, chat_user_id: str | None, creates_user: bool = False
) -> Decision | None:
    decision = rate_limit_hit(
        chat_policies(
            bot_id=bot_id,
            remote_addr=remote_addr,
            chat_user_id=chat_user_id,
            creates_user=creates_user,
        )
    )
    if decision is not None and not decision.allowed:
        raise RateLimited.retry_in(decision.retry_after, headers=rate_limit_headers(decision))
    return decision


def stream_chat(*, webhook_id: str, method: str, route: str) -> tuple[ChatConnection, str]:
    """The chat the URL names and its bot's workspace id, for a GET of a
    stream: 404 when there is none, then 405 for another method."""
    chat = (
        ChatConnection.objects.filter(webhook_id=webhook_id)
        .annotate(bot_workspace_id=F("bot__workspace_id"))
        .first()
    )
    if chat is None:
        raise ResourceNotFound(f"Chat {webhook_id!r} not found")
    if method != "GET":
        raise MethodNotFound(
            f"Method {method!r} not allowed on {route}: use GET", headers={"Allow": "GET"}
        )
    return chat, chat.bot_workspace_id


def stream_response(
    *, listener: Listener, subscription: Subscription, first: bytes = PING
) -> StreamingHttpResponse:
    """A listener's stream (chat.live.stream) as the answer: its rate limit
    headers, and nothing on the way keeping it back."""
    response = StreamingHttpResponse(
        listener_stream(
            subscription=subscription,
            participant_id=listener.participant_id,
            workspace_id=listener.workspace_id,
            heartbeat=settings.LIVE_STREAM_HEARTBEAT,
            first=first,
        ),
        content_type="text/event-stream",
    )
    if listener.rate_limit is not None:
        for name, value in rate_limit_headers(listener.rate_limit).items():
            response[name] = value
    response["Cache-Control"] = "no-cache"
    # nginx and similar proxies: pass each message on as it comes.
    response["X-Accel-Buffering"] = "no"
    return response


def key_user(*, chat: ChatConnection, key: str | None) -> User:
    """The user an `x-user-key` names, or the 401 that refuses it."""

    def refused(message: str) -> Unauthorized:
        return Unauthorized(message, headers={"WWW-Authenticate": USER_KEY_CHALLENGE})

    if key is None:
        raise refused("Send the user key in the x-user-key header")
    try:
        chat_user_id = user_key_read(connection=chat, key=key)
    except InvalidUserKey as exc:
        raise refused(str(exc)) from None
    user = (
        User.objects.filter(bot_id=chat.bot_id, chat_id=chat_user_id)
        .only("id", "chat_id", "bot_id")
        .first()
    )
    if user is None:
        raise refused("The user key names a user that does not exist")
    return user
