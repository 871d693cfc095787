"""Who takes part in a conversation. In the chat interface only its owner
adds or removes them, and the owner stays; the bot, through the runtime API,
adds any user of its own to any of its conversations and removes anyone."""

from django.db import transaction

from bots.models import Conversation, Participant, User
from bots.selectors.references import user_reference_get
from chat.event_types import PARTICIPANT_ADDED, PARTICIPANT_REMOVED
from chat.live.publish import stream_publish
from chat.presenters import participant_added_stream_json, participant_stream_json
from chat.selectors.participants import chat_participant_get, not_taking_part
from chat.selectors.users import chat_user_find
from chat.services.conversations import owner_only
from chat.services.user_purge import user_engaged
from platform_site.foundation.domain_errors import MissingReference, NotPermitted


@transaction.atomic
def chat_participant_add(
    *, actor: User, conversation: Conversation, chat_user_id: str
) -> tuple[User, bool]:
    """Add a user of the bot to a conversation the actor owns. Answers the
    user and whether they were added."""
    owner_only(user=actor, conversation=conversation, action="add participants")
    user = chat_user_find(bot_id=conversation.bot_id, chat_id=chat_user_id)
    if user is None:
        raise MissingReference(f"userId: user {chat_user_id!r} does not exist")
    return user, participant_add(conversation=conversation, user=user)


@transaction.atomic
def chat_participant_remove(*, actor: User, conversation: Conversation, chat_user_id: str) -> None:
    """Remove a participant other than the owner from a conversation the actor owns."""
    owner_only(user=actor, conversation=conversation, action="remove participants")
    user = chat_participant_get(conversation=conversation, chat_user_id=chat_user_id)
    if user.id == conversation.owner_id:
        # Nobody may: a DELETE has no payload to be invalid (403, not 400).
        raise NotPermitted(
            f"User {user.chat_id!r} owns conversation {conversation.chat_id!r} "
            "and cannot be removed from it"
        )
    if not _participation_delete(conversation=conversation, user=user):
        raise not_taking_part(user_id=user.chat_id, conversation_id=conversation.chat_id)


def participant_add(*, conversation: Conversation, user: User) -> bool:
    """Add a user of the conversation's bot to it; adding one already there
    changes nothing. Whether they were added; listeners hear of it. (In a
    transaction: user_engaged holds a purgeable user until it ends.)"""
    user_engaged(user=user)
    _, added = Participant.objects.get_or_create(conversation=conversation, user=user)
    if added:
        stream_publish(
            conversation_id=conversation.id,
            type=PARTICIPANT_ADDED,
            data=participant_added_stream_json(conversation=conversation, user=user),
        )
    return added


@transaction.atomic
def bot_participant_add(*, conversation: Conversation, user_id: str) -> tuple[User, bool]:
    """Add a user of the bot, named by their runtime id, to one of its
    conversations. Answers the user and whether they were added."""
    user = user_reference_get(bot_id=conversation.bot_id, user_id=user_id)
    return user, participant_add(conversation=conversation, user=user)


@transaction.atomic
def bot_participant_remove(*, conversation: Conversation, user: User) -> None:
    """Remove a participant, whoever they are, as the bot may. The owner
    leaves their ownership with it: the chat interface's owner-only rules
    then hold for nobody (as when the owner is deleted), rather than for
    someone who no longer takes part, or who the bot adds again later."""
    if not _participation_delete(conversation=conversation, user=user):
        raise not_taking_part(user_id=user.id, conversation_id=conversation.id)
    if conversation.owner_id == user.id:
        Conversation.objects.filter(pk=conversation.pk, owner=user).update(owner=None)
        conversation.owner = None


def _participation_delete(*, conversation: Conversation, user: User) -> bool:
    """Whether the user took part until now (another request may have
    removed them first); listeners hear that they left."""
    removed, _ = Participant.objects.filter(conversation=conversation, user=user).delete()
    if removed:
        stream_publish(
            conversation_id=conversation.id,
            type=PARTICIPANT_REMOVED,
            data=participant_stream_json(conversation=conversation, user=user),
        )
    return bool(removed)
