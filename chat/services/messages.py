"""Messages: a user's, sent through the chat interface, becomes an event for
the bot; a bot's, sent through the runtime API, does not. Both reach the
conversation's listeners, as do the bot's changes and deletes of any
message of its conversations."""

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from bots.models import Bot, Conversation, Message, User
from bots.selectors.references import conversation_reference_get, user_reference_get
from bots.services.bots import bot_user_get_or_create
from chat.event_types import MESSAGE_CREATED, MESSAGE_DELETED, MESSAGE_UPDATED
from chat.live.publish import stream_publish
from chat.message_payloads import payload_of_type
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
from platform_site.foundation.domain_errors import InvalidValue, MissingReference, NotPermitted
from platform_site.foundation.ids import new_id_at
from platform_site.foundation.lookups import id_form_check, object_not_found
from platform_site.foundation.sql.row_insert import insert_statement, rows_write, update_statement
from platform_site.foundation.tags import TagMatch, tags_changed


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
def chat_message_update(
    *,
    user: User,
    message: Message,
    payload: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> Message:
    """Change a message the user sent through the chat interface (the
    official webchat's updateMessage): its payload, for another of its type,
    and its metadata. Listeners hear of it (`message_updated`)."""
    if message.is_bot or message.user_id != user.id:
        raise NotPermitted(f"Only the sender of message {message.id!r} may change it")
    if payload is not None:
        message.payload = payload_of_type(payload, kind=message.type)
    if metadata is not None:
        message.metadata = metadata
    message.save(update_fields=["payload", "metadata", "updated_at"])
    stream_publish(
        conversation_id=message.conversation_id,
        type=MESSAGE_UPDATED,
        data=message_stream_json(message),
    )
    return message


@transaction.atomic
def chat_message_delete(*, user: User, message: Message) -> None:
    """Delete a message the user sent through the chat interface (not one the
    bot sent in their name)."""
    if message.is_bot or message.user_id != user.id:
        raise NotPermitted(f"Only the sender of message {message.id!r} may delete it")
    _message_delete(message)


def _message_delete(message: Message) -> None:
    """Delete a message (its conversation and user loaded) and tell the listeners."""
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
        # No transaction around it: what it reads is checked again by the
        # write's foreign keys, and the write is one statement (rows_write).
        return _bot_message_insert(
            bot=bot,
            conversation=conversation_reference_get(bot_id=bot.id, conversation_id=conversation_id),
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
    # The message and the conversation's new updatedAt written together.
    message = Message(is_bot=True, **fields)
    rows_write(
        insert_statement(message),
        update_statement(Conversation, conversation.pk, updated_at=message.created_at),
    )
    stream_publish(
        conversation_id=conversation.id,
        type=MESSAGE_CREATED,
        data=message_stream_json(message),
    )
    return message


@transaction.atomic
def bot_message_update(
    *,
    bot: Bot,
    message_id: str,
    tags: dict[str, str | None] | None = None,
    payload: dict[str, Any] | None = None,
) -> Message:
    """Change a message of the bot's conversations: its tags are merged (None
    removes one), its payload replaced by another of its type. Any message:
    the hosted API lets a bot change users' messages too (an integration
    acknowledges an incoming one by tagging it). A message still scheduled
    may be changed before it is sent. Listeners hear of a new payload
    (`message_updated`, the message as the chat interface shows it) once it
    commits; tags are not theirs to see."""
    row = _bot_message_locked(bot=bot, message_id=message_id)
    shown = row.payload
    if tags is not None:
        row.tags = tags_changed(row.tags, tags, field="tags")
    if payload is not None:
        row.payload = payload_of_type(payload, kind=row.type)
    if isinstance(row, ScheduledMessage):
        row.save(update_fields=["tags", "payload"])
        return scheduled_message_message(row)
    row.save(update_fields=["tags", "payload", "updated_at"])
    if row.payload != shown:
        stream_publish(
            conversation_id=row.conversation_id,
            type=MESSAGE_UPDATED,
            data=message_stream_json(row),
        )
    return row


@transaction.atomic
def bot_message_delete(*, bot: Bot, message_id: str) -> None:
    """Delete a message of the bot's conversations, a user's too, as the
    hosted API lets a bot; listeners hear of it as when its sender deletes it
    in the chat interface. A message still scheduled is canceled, unheard."""
    row = _bot_message_locked(bot=bot, message_id=message_id)
    if isinstance(row, ScheduledMessage):
        row.delete()
    else:
        _message_delete(row)


def _bot_message_locked(*, bot: Bot, message_id: str) -> Message | ScheduledMessage:
    """The bot's message with this id, or the scheduled message that will be
    it, locked until the transaction ends, with its conversation and user
    (listeners are told their chat ids)."""
    id_form_check(message_id, prefix="msg", noun="message")

    def locked(model: type[Message] | type[ScheduledMessage]) -> Message | ScheduledMessage | None:
        rows = model.objects.select_for_update(of=("self",)).select_related("conversation", "user")
        return rows.filter(bot=bot, pk=message_id).first()

    row = locked(Message) or locked(ScheduledMessage)
    if row is None:
        # It may have fallen due meanwhile: the claim that made it (which the
        # lookup of the scheduled one waited for) has committed it by now.
        row = locked(Message)
    if row is None:
        raise object_not_found("message", message_id)
    return row


def _tagged_message(
    conversation: Conversation, tags: dict[str, str], keys: list[str] | None
) -> Message | None:
    match = TagMatch(tags, keys)
    message = match.first(Message.objects.filter(conversation=conversation))
    if message is not None:
        return message
    scheduled = match.first(
        ScheduledMessage.objects.filter(conversation=conversation).select_related(
            "conversation", "user"
        )
    )
    return None if scheduled is None else scheduled_message_message(scheduled)


def _deleted_meanwhile() -> MissingReference:
    # Foreign keys are checked at commit: the conversation or the user was
    # deleted between the lookups and the commit.
    return MissingReference("The conversation or the user was deleted while the message was made")
