"""Messages: a user's, sent through the chat interface, becomes an event for
the bot; a bot's, sent through the runtime API, does not. Both reach the
conversation's listeners."""

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from bots.models import Bot, Conversation, Message, User
from bots.selectors.references import conversation_reference_get, user_reference_get
from bots.services.bots import bot_user_get_or_create
from chat.event_types import MESSAGE_CREATED, MESSAGE_DELETED
from chat.live.publish import stream_publish
from chat.models import ScheduledMessage
from chat.presenters import (
    conversation_runtime_json,
    message_deleted_stream_json,
    message_runtime_json,
    message_stream_json,
    user_runtime_json,
)
from chat.selectors.conversations import conversation_reference_and_author
from chat.services.scheduled_messages import scheduled_message_message
from events.services.events import EventReferences, event_build, event_stored
from platform_site.api.ids import new_id_at
from platform_site.api.tags import tagged
from platform_site.domain_errors import InvalidValue, MissingReference, NotPermitted
from platform_site.row_insert import insert_statement, rows_write, update_statement


def chat_message_create(
    *,
    user: User,
    conversation_chat_id: str,
    payload: dict[str, Any],
    metadata: dict[str, Any] | None = None,
) -> Message:
    """A user's message in a conversation they take part in; the bot hears of
    it through a `message_created` event. The message, the conversation's
    new updatedAt and the event are written together (rows_write: one
    statement on PostgreSQL)."""
    conversation, user = conversation_reference_and_author(user=user, chat_id=conversation_chat_id)
    message = Message(
        bot_id=user.bot_id,
        conversation=conversation,
        user=user,
        type=payload["type"],
        payload=payload,
        metadata=metadata,
        is_bot=False,
    )
    message_insert = insert_statement(message)
    event = event_build(
        bot_id=user.bot_id,
        type=MESSAGE_CREATED,
        payload={
            "message": message_runtime_json(message),
            "conversation": conversation_runtime_json(conversation),
            "user": user_runtime_json(user),
        },
        references=EventReferences(conversation=conversation, user=user, message=message),
    )
    rows_write(
        message_insert,
        update_statement(Conversation, conversation.pk, updated_at=message.created_at),
        insert_statement(event),
    )
    event_stored(event)
    stream_publish(
        conversation_id=conversation.id, type=MESSAGE_CREATED, data=message_stream_json(message)
    )
    return message


@transaction.atomic
def chat_message_delete(*, user: User, message: Message) -> None:
    """Delete a message the user sent through the chat interface (not one the
    bot sent in their name)."""
    if message.is_bot or message.user_id != user.id:
        raise NotPermitted(f"Only the sender of message {message.id!r} may delete it")
    data = message_deleted_stream_json(message)
    message.delete()
    stream_publish(conversation_id=message.conversation_id, type=MESSAGE_DELETED, data=data)


def bot_message_create(
    *,
    bot: Bot,
    conversation_id: str,
    user_id: str,
    payload: dict[str, Any],
    tags: dict[str, str],
    origin: str = "",
    due_at: datetime | None = None,
) -> Message:
    """A message of the bot in one of its conversations, written as `user_id`:
    any user of the bot (the contract does not ask that they take part), or
    the bot's own id, as hosted-API bots reply (`userId: ctx.botId`).

    It is not an event for the bot (the bot wrote it; hearing of it would
    loop), but the conversation's listeners hear of it once it commits. With
    a `due_at` still to come, it is stored to be made then
    (scheduled_messages.py), and what is answered is the message it will be."""
    try:
        with transaction.atomic():
            return _bot_message_insert(
                bot=bot,
                conversation=conversation_reference_get(
                    bot_id=bot.id, conversation_id=conversation_id
                ),
                user_id=user_id,
                payload=payload,
                tags=tags,
                origin=origin,
                due_at=due_at,
            )
    except IntegrityError:
        raise _deleted_meanwhile() from None


def bot_message_get_or_create(
    *,
    bot: Bot,
    conversation_id: str,
    user_id: str,
    payload: dict[str, Any] | None,
    tags: dict[str, str],
    discriminate_by_tags: list[str] | None,
    origin: str = "",
    due_at: datetime | None = None,
) -> tuple[Message, bool]:
    """The bot's message in the conversation whose tags match, sent or still
    scheduled, else a new one as bot_message_create makes it; and whether it
    was made. Tags match when every tag of `discriminate_by_tags` has the
    same value (or is absent from both), or, without that list, when the tags
    are the same. With no tag to match on, nothing identifies an earlier
    message: a new one is made."""
    try:
        with transaction.atomic():
            conversation = conversation_reference_get(
                bot_id=bot.id, conversation_id=conversation_id
            )
            # Requests for the same conversation take turns, so that two of
            # them never both make the message.
            Conversation.objects.select_for_update().filter(pk=conversation.pk).exists()
            existing = _tagged_message(conversation, tags, discriminate_by_tags)
            if existing is not None:
                return existing, False
            if payload is None:
                raise InvalidValue("payload: Required when no message matches the tags.")
            message = _bot_message_insert(
                bot=bot,
                conversation=conversation,
                user_id=user_id,
                payload=payload,
                tags=tags,
                origin=origin,
                due_at=due_at,
            )
            return message, True
    except IntegrityError:
        raise _deleted_meanwhile() from None


def _bot_message_insert(
    *,
    bot: Bot,
    conversation: Conversation,
    user_id: str,
    payload: dict[str, Any],
    tags: dict[str, str],
    origin: str,
    due_at: datetime | None,
) -> Message:
    if user_id == bot.id:
        user = bot_user_get_or_create(bot=bot)
    else:
        user = user_reference_get(bot_id=bot.id, user_id=user_id)
    fields: dict[str, Any] = {
        "bot": bot,
        "conversation": conversation,
        "user": user,
        "type": payload["type"],
        "payload": payload,
        "tags": tags,
        "origin": origin,
    }
    if due_at is not None and due_at > timezone.now():
        scheduled = ScheduledMessage.objects.create(
            id=new_id_at("msg", due_at), due_at=due_at, **fields
        )
        return scheduled_message_message(scheduled)
    message = Message.objects.create(is_bot=True, **fields)
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=message.created_at)
    stream_publish(
        conversation_id=conversation.id,
        type=MESSAGE_CREATED,
        data=message_stream_json(message),
    )
    return message


def _tagged_message(
    conversation: Conversation, tags: dict[str, str], keys: list[str] | None
) -> Message | None:
    def matches(candidate: dict[str, str]) -> bool:
        if keys is None:
            return candidate == tags
        return all(candidate.get(key) == tags.get(key) for key in keys)

    # The query narrows to the tags that must be there; matches() decides.
    wanted = {key: value for key, value in tags.items() if keys is None or key in keys}
    if not (tags if keys is None else keys):
        return None
    for message in tagged(Message.objects.filter(conversation=conversation), wanted).order_by("id"):
        if matches(message.tags):
            return message
    scheduled = tagged(ScheduledMessage.objects.filter(conversation=conversation), wanted)
    for candidate in scheduled.select_related("conversation", "user").order_by("id"):
        if matches(candidate.tags):
            return scheduled_message_message(candidate)
    return None


def _deleted_meanwhile() -> MissingReference:
    # Foreign keys are checked at commit: the conversation or the user was
    # deleted between the lookups and the commit.
    return MissingReference("The conversation or the user was deleted while the message was made")
