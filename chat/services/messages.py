"""Users' messages: a created one becomes an event for the bot and reaches
the conversation's listeners."""

from typing import Any

from django.db import transaction

from bots.models import Conversation, Message, User
from bots.presenters import conversation_runtime_json, message_runtime_json, user_runtime_json
from chat.event_types import MESSAGE_CREATED, MESSAGE_DELETED
from chat.live.publish import stream_publish
from chat.presenters import message_deleted_stream_json, message_stream_json
from chat.selectors import conversation_reference_and_author
from events.services import EventReferences, event_build, event_stored
from platform_site.api.errors import Forbidden
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
        raise Forbidden(f"Only the sender of message {message.id!r} may delete it")
    data = message_deleted_stream_json(message)
    message.delete()
    stream_publish(conversation_id=message.conversation_id, type=MESSAGE_DELETED, data=data)
