from typing import Any

from django.db import transaction
from django.utils import timezone

from bots.models import Conversation, Message, Participant, User
from bots.presenters import conversation_runtime_json, message_runtime_json, user_runtime_json
from events.services import EventReferences, event_record
from platform_site.api.errors import Forbidden, ReferenceNotFound

MESSAGE_CREATED = "message_created"


def conversation_for_participant(*, user: User, chat_id: str) -> Conversation:
    """The conversation a chat id names in the user's bot, if the user takes part in it."""
    conversation = Conversation.objects.filter(bot_id=user.bot_id, chat_id=chat_id).first()
    if conversation is None:
        raise ReferenceNotFound(f"conversationId: conversation {chat_id!r} does not exist")
    if not Participant.objects.filter(conversation=conversation, user=user).exists():
        raise Forbidden(f"You are not a participant of conversation {chat_id!r}")
    return conversation


@transaction.atomic
def chat_message_create(
    *,
    user: User,
    conversation_chat_id: str,
    payload: dict[str, Any],
    metadata: dict[str, Any] | None = None,
) -> Message:
    """A user's message in a conversation they take part in; the bot hears of
    it through a `message_created` event, stored in the same transaction."""
    conversation = conversation_for_participant(user=user, chat_id=conversation_chat_id)
    message = Message.objects.create(
        bot_id=user.bot_id,
        conversation=conversation,
        user=user,
        type=payload["type"],
        payload=payload,
        metadata=metadata,
        is_bot=False,
    )
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=timezone.now())
    event_record(
        bot_id=user.bot_id,
        type=MESSAGE_CREATED,
        payload={
            "message": message_runtime_json(message),
            "conversation": conversation_runtime_json(conversation),
            "user": user_runtime_json(user),
        },
        references=EventReferences(conversation=conversation, user=user, message=message),
    )
    return message
