"""Conversations as the chat interface makes and deletes them."""

from django.db import IntegrityError, transaction

from bots.models import Conversation, Participant, User
from chat.event_types import PARTICIPANT_REMOVED
from chat.live.publish import stream_publish
from chat.presenters import participant_stream_json
from chat.selectors.conversations import chat_conversation_find
from platform_site.api.ids import new_id
from platform_site.domain_errors import AlreadyExists, NotPermitted


@transaction.atomic
def conversation_create(*, creator: User, chat_id: str | None = None) -> Conversation:
    """A conversation whose creator is its owner and first participant;
    AlreadyExists when the chosen chat id is taken (also by a racing request)."""
    conversation_id = new_id("conv")
    try:
        with transaction.atomic():
            conversation = Conversation.objects.create(
                id=conversation_id,
                bot_id=creator.bot_id,
                chat_id=chat_id or conversation_id,
                owner=creator,
                tags={"chat:id": chat_id} if chat_id else {},
            )
    except IntegrityError:
        raise AlreadyExists(f"Conversation {chat_id!r} already exists") from None
    Participant.objects.create(conversation=conversation, user=creator)
    return conversation


@transaction.atomic
def conversation_get_or_create(*, user: User, chat_id: str) -> tuple[Conversation, bool]:
    """The conversation with this chat id, which the user must take part in,
    or a new one they own; and whether it was made."""
    conversation = chat_conversation_find(user=user, chat_id=chat_id)
    if conversation is not None:
        return conversation, False
    try:
        return conversation_create(creator=user, chat_id=chat_id), True
    except AlreadyExists:
        # A request with the same id made it first: answer as if found.
        found = chat_conversation_find(user=user, chat_id=chat_id)
        if found is None:
            raise
        return found, False


def owner_only(*, user: User, conversation: Conversation, action: str) -> None:
    if conversation.owner_id != user.id:
        raise NotPermitted(f"Only the owner of conversation {conversation.chat_id!r} may {action}")


@transaction.atomic
def conversation_delete(*, user: User, conversation: Conversation) -> None:
    """Delete a conversation the user owns, with its messages. Every
    participant's listeners hear that they were removed, which ends their streams."""
    owner_only(user=user, conversation=conversation, action="delete it")
    participants = list(User.objects.filter(participations__conversation=conversation))
    conversation_id = conversation.id  # delete() clears the primary key
    conversation.delete()
    for participant in participants:
        stream_publish(
            conversation_id=conversation_id,
            type=PARTICIPANT_REMOVED,
            data=participant_stream_json(conversation=conversation, user=participant),
        )
