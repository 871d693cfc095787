"""Who takes part in a conversation, and what taking part lets a chat user see."""

from typing import TypeVar

from django.db.models import Exists, Model, OuterRef, QuerySet

from bots.models import Conversation, Participant, User
from chat.keys import is_chat_id
from platform_site.foundation.domain_errors import MalformedId, NotFound, NotPermitted
from platform_site.foundation.lookups import id_form_check, object_not_found
from platform_site.foundation.pagination import Page, PageRequest, paginate

ModelT = TypeVar("ModelT", bound=Model)


def takes_part(user: User, conversation: str = "pk") -> Exists:
    """Whether `user` takes part in the conversation of the row (at `conversation`)."""
    return Exists(Participant.objects.filter(conversation=OuterRef(conversation), user=user))


def not_a_participant(chat_id: str) -> NotPermitted:
    return NotPermitted(f"You are not a participant of conversation {chat_id!r}")


def participant_object_get(
    queryset: QuerySet[ModelT], *, user: User, object_id: str, prefix: str, noun: str
) -> ModelT:
    """The object of `queryset` (a message, an event: its rows have a
    `conversation`) with this runtime id, if it is in a conversation `user`
    takes part in. One the bot does not have is 404; one of a conversation
    the user is not in, 403."""
    id_form_check(object_id, prefix=prefix, noun=noun, shown=80)
    found = (
        queryset.filter(bot_id=user.bot_id, id=object_id)
        .annotate(is_participant=takes_part(user, "conversation"))
        .first()
    )
    if found is None:
        raise object_not_found(noun, object_id)
    if not found.is_participant:
        raise NotPermitted(
            f"{noun.capitalize()} {object_id!r} is in a conversation you do not take part in"
        )
    return found


def participants_list(*, conversation: Conversation, page: PageRequest) -> Page[Participant]:
    """The conversation's participants in the order they joined."""
    return paginate(
        Participant.objects.filter(conversation=conversation).select_related("user"),
        ordering=["id"],
        list_name=f"chat-participants:{conversation.id}",
        request=page,
    )


def chat_participant_get(*, conversation: Conversation, chat_user_id: str) -> User:
    """A participant of the conversation named by their chat id."""
    if not is_chat_id(chat_user_id):
        raise MalformedId(f"{chat_user_id[:80]!r} is not a user id")
    user = _participant(conversation, chat_id=chat_user_id)
    if user is None:
        raise not_taking_part(user_id=chat_user_id, conversation_id=conversation.chat_id)
    return user


def participant_get(*, conversation: Conversation, user_id: str) -> User:
    """A participant of the conversation named by their runtime id."""
    id_form_check(user_id, prefix="user", noun="user")
    user = _participant(conversation, id=user_id)
    if user is None:
        raise not_taking_part(user_id=user_id, conversation_id=conversation.id)
    return user


def _participant(conversation: Conversation, **user: str) -> User | None:
    return User.objects.filter(
        bot_id=conversation.bot_id, participations__conversation=conversation, **user
    ).first()


def not_taking_part(*, user_id: str, conversation_id: str) -> NotFound:
    """The refusal of a user who is not a participant, in the ids the caller uses."""
    return NotFound(f"User {user_id!r} is not a participant of conversation {conversation_id!r}")
