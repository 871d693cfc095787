"""GET {chat_url}/{clientId}/initialize: how the official webchat starts.

One request gives a browser its user (made, with a key, when it sends none),
its conversation (made when it names none) and the live stream of that
conversation, whose first message is `init`: the conversation, its newest
messages, its participants and the user with its `userKey`. The stream is
the live stream's (chat.live.stream), with its heartbeat, its limits and its
listener accounting; the webchat reconnects with the key and conversation id
`init` gave it.

Checked in the order of the live stream: unknown chat 404, wrong method 405,
key 401 (none: a chat whose operator signs keys makes no user, 401), rate
limit 429, conversation id 400, not a participant 403; a conversation that
is gone is replaced by a new one."""

import json
import logging
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.db import transaction
from django.http import HttpRequest, HttpResponseBase
from django.views.decorators.csrf import csrf_exempt

from bots.models import Conversation, Message, User
from chat.authentication import USER_KEY_CHALLENGE
from chat.live.access import Listener, key_user, rate_limit_check, stream_chat, stream_response
from chat.live.bus import conversation_channel, live_bus
from chat.live.stream import sse_message
from chat.models import ChatConnection, UserKeyMode
from chat.presenters import conversation_chat_json, message_stream_json, user_chat_json
from chat.selectors.conversations import chat_conversation_get
from chat.selectors.messages import chat_messages_list
from chat.selectors.participants import participants_list
from chat.services.conversations import conversation_create
from chat.services.users import chat_user_create
from platform_site.api.database import database_release
from platform_site.api.errors import (
    APIError,
    Internal,
    Unauthorized,
)
from platform_site.api.exception_handler import domain_error, error_response
from platform_site.api.rate_limit import Decision
from platform_site.foundation.domain_errors import DomainError, NotFound
from platform_site.foundation.pagination import PageRequest

logger = logging.getLogger("chat.live")

INIT = "init"


@dataclass(frozen=True)
class Start:
    """Who the stream is for, and what they start with."""

    listener: Listener
    user: User
    key: str
    conversation: Conversation
    # `init` when the conversation was made just now: nothing of it to read.
    init: dict[str, Any] | None = None


@csrf_exempt  # authenticated by a header, like the rest of the API
async def webchat_initialize(request: HttpRequest, webhook_id: str) -> HttpResponseBase:
    try:
        start = await sync_to_async(webchat_start)(
            webhook_id=webhook_id,
            method=request.method or "",
            key=request.headers.get("x-user-key"),
            # Absent: a new conversation; present, it must be one (empty is not).
            conversation_chat_id=request.GET.get("conversationId"),
            remote_addr=request.META.get("REMOTE_ADDR", ""),
        )
        if not isinstance(request, ASGIRequest):
            logger.error("webchat stream requested from a WSGI server: serve platform_site.asgi")
            raise Internal("The webchat's stream is served by the ASGI application only")
    except APIError as error:
        return error_response(error)
    except DomainError as refusal:
        return error_response(domain_error(refusal))
    listener = start.listener
    # Subscribed before `init` is read: what is published meanwhile is in
    # both, and the webchat keeps one of each message id. A conversation
    # made by this request has nothing to read and no one to publish to it
    # yet (the bot learns of it from the webchat's conversation_started,
    # sent once `init` arrives), so its `init` comes with the start.
    subscription = await live_bus().subscribe(conversation_channel(listener.conversation_id)).open()
    init = start.init
    if init is None:
        try:
            init = await sync_to_async(webchat_init)(start)
        except BaseException:
            subscription.close()
            raise
    init_message = json.dumps({"type": INIT, "data": init}, separators=(",", ":"))
    return stream_response(
        listener=listener, subscription=subscription, first=sse_message(init_message)
    )


def webchat_start(
    *,
    webhook_id: str,
    method: str,
    key: str | None,
    conversation_chat_id: str | None,
    remote_addr: str,
) -> Start:
    """The user and conversation a request starts with, made when it names
    none, or the error that refuses it."""
    try:
        chat, workspace_id = stream_chat(webhook_id=webhook_id, method=method, route="initialize")
        user_made = key is None
        # A new user and their conversation in one transaction: one commit.
        with transaction.atomic() if user_made else nullcontext():
            if key is None:
                user, key, rate_limit = _new_user(chat=chat, remote_addr=remote_addr)
            else:
                user = key_user(chat=chat, key=key)
                rate_limit = rate_limit_check(
                    bot_id=chat.bot_id, remote_addr=remote_addr, chat_user_id=user.chat_id
                )
            conversation, made = _conversation(user=user, chat_id=conversation_chat_id)
        listener = Listener(
            conversation_id=conversation.id,
            participant_id=user.chat_id,
            workspace_id=workspace_id,
            rate_limit=rate_limit,
        )
        start = Start(listener=listener, user=user, key=key, conversation=conversation)
        if made:
            # Its only participant is its maker, and it has no message yet.
            # A user made now is whole; the key's lookup loads a few fields.
            shown = user if user_made else User.objects.get(pk=user.pk)
            init = _init_json(start, user=shown, messages=[], participants=[shown])
            start = replace(start, init=init)
        return start
    finally:
        # A stream outlives its lookups by hours: listeners hold no connection.
        database_release()


def _conversation(*, user: User, chat_id: str | None) -> tuple[Conversation, bool]:
    """The conversation the webchat resumes, or a new one when it names none
    or one that is gone (deleted by the bot, say): the webchat keeps the id
    it was given and cannot recover from a refusal, it would wait forever.
    An id that cannot be one (400) or a conversation of others (403) is
    refused still."""
    if chat_id is not None:
        try:
            return chat_conversation_get(user=user, chat_id=chat_id), False
        except NotFound:
            logger.info("webchat: conversation %r is gone, a new one is made", chat_id[:80])
    return conversation_create(creator=user), True


def _new_user(*, chat: ChatConnection, remote_addr: str) -> tuple[User, str, Decision | None]:
    """A user made for a browser that has no key yet, as POST users makes
    one: counted first against the client's address and the limits on users
    made, and where that left them. Not purgeable: its conversation is made
    with it."""
    if chat.user_key_mode == UserKeyMode.MANUAL:
        raise Unauthorized(
            "This chat does not issue user keys: its operator signs them. "
            "Send the key you were given in the x-user-key header",
            headers={"WWW-Authenticate": USER_KEY_CHALLENGE},
        )
    rate_limit = rate_limit_check(
        bot_id=chat.bot_id, remote_addr=remote_addr, chat_user_id=None, creates_user=True
    )
    user, key = chat_user_create(connection=chat)
    return user, key, rate_limit


def webchat_init(start: Start) -> dict[str, Any]:
    """The `init` message's data of a conversation that existed: read."""
    try:
        first_page = PageRequest(size=settings.PAGE_SIZE_DEFAULT, token=None)
        messages = chat_messages_list(
            conversation=start.conversation, page=first_page, reader=start.user
        )
        participants = participants_list(conversation=start.conversation, page=first_page)
        return _init_json(
            start,
            user=User.objects.get(pk=start.user.pk),
            messages=messages.items,
            participants=[participant.user for participant in participants.items],
        )
    finally:
        database_release()


def _init_json(
    start: Start, *, user: User, messages: list[Message], participants: list[User]
) -> dict[str, Any]:
    """`init`: the conversation, its newest messages (newest first), its
    participants and the user with its key."""
    return {
        "conversation": conversation_chat_json(start.conversation),
        "messages": [message_stream_json(message) for message in messages],
        "participants": [user_chat_json(participant) for participant in participants],
        "user": {**user_chat_json(user), "userKey": start.key},
    }
