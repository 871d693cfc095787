"""Custom events a user sends in a conversation: an event for the bot, which
the event engine delivers like any other, and news for the listeners."""

from typing import Any

from django.db import transaction

from bots.models import Conversation, User
from chat.event_types import CUSTOM_EVENT, EVENT_CREATED
from chat.live.publish import stream_publish
from chat.presenters import chat_event_stream_json
from chat.selectors.conversations import chat_conversation_reference
from events.models import Event
from events.services.events import EventReferences, event_record


@transaction.atomic
def chat_event_create(
    *,
    user: User,
    conversation_chat_id: str,
    payload: dict[str, Any],
    bind_conversation: bool = True,
    bind_user: bool = True,
) -> tuple[Event, Conversation]:
    """A `custom` event whose payload is the user's, in a conversation they
    take part in, and that conversation. It is linked to the conversation
    and the user (the delivery carries their runtime ids) unless the
    official webchat asks it not to be (`bindConversation`, `bindUser`
    false): then the bot is not told which, the conversation's listeners do
    not hear of it, and GET events/{id} does not find it."""
    conversation = chat_conversation_reference(user=user, chat_id=conversation_chat_id)
    event = event_record(
        bot_id=user.bot_id,
        type=CUSTOM_EVENT,
        payload=payload,
        references=EventReferences(
            conversation=conversation if bind_conversation else None,
            user=user if bind_user else None,
        ),
    )
    if bind_conversation and bind_user:
        stream_publish(
            conversation_id=conversation.id,
            type=EVENT_CREATED,
            data=chat_event_stream_json(event),
        )
    return event, conversation
