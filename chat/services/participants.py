"""Who takes part in a conversation: only its owner adds or removes them."""

from django.db import transaction

from bots.models import Conversation, Participant, User
from chat.event_types import PARTICIPANT_ADDED, PARTICIPANT_REMOVED
from chat.live.publish import stream_publish
from chat.presenters import participant_stream_json
from chat.selectors.participants import participant_get
from chat.selectors.users import chat_user_find
from chat.services.conversations import owner_only
from platform_site.domain_errors import MissingReference, NotFound, NotPermitted


@transaction.atomic
def participant_add(
    *, actor: User, conversation: Conversation, chat_user_id: str
) -> tuple[User, bool]:
    """Add a user of the bot to the conversation; adding one already there
    changes nothing. Answers the user and whether they were added."""
    owner_only(user=actor, conversation=conversation, action="add participants")
    user = chat_user_find(bot_id=conversation.bot_id, chat_id=chat_user_id)
    if user is None:
        raise MissingReference(f"userId: user {chat_user_id!r} does not exist")
    _, added = Participant.objects.get_or_create(conversation=conversation, user=user)
    if added:
        stream_publish(
            conversation_id=conversation.id,
            type=PARTICIPANT_ADDED,
            data=participant_stream_json(conversation=conversation, user=user),
        )
    return user, added


@transaction.atomic
def participant_remove(*, actor: User, conversation: Conversation, chat_user_id: str) -> None:
    """Remove a participant other than the owner."""
    owner_only(user=actor, conversation=conversation, action="remove participants")
    user = participant_get(conversation=conversation, chat_user_id=chat_user_id)
    if user.id == conversation.owner_id:
        # Nobody may: a DELETE has no payload to be invalid (403, not 400).
        raise NotPermitted(
            f"User {user.chat_id!r} owns conversation {conversation.chat_id!r} "
            "and cannot be removed from it"
        )
    removed, _ = Participant.objects.filter(conversation=conversation, user=user).delete()
    if not removed:
        # Another request removed them first.
        raise NotFound(
            f"User {user.chat_id!r} is not a participant of conversation {conversation.chat_id!r}"
        )
    stream_publish(
        conversation_id=conversation.id,
        type=PARTICIPANT_REMOVED,
        data=participant_stream_json(conversation=conversation, user=user),
    )
