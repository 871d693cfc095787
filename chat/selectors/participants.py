"""Who takes part in a conversation, and what taking part lets a chat user see."""

from typing import TypeVar

from django.db.models import Exists, Model, OuterRef, QuerySet

from bots.models import Conversation, Participant, User
from chat.keys import is_chat_id
from platform_site.api.pagination import Page, PageRequest, paginate
from platform_site.domain_errors import MalformedId, NotFound, NotPermitted
from platform_site.lookups import id_form_check, object_not_found

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


def participant_get(*, conversation: Conversation, chat_user_id: str) -> User:
    if not is_chat_id(chat_user_id):
        raise MalformedId(f"{chat_user_id[:80]!r} is not a user id")
    user = User.objects.filter(
        bot_id=conversation.bot_id, chat_id=chat_user_id, participations__conversation=conversation
    ).first()
    if user is None:
        raise NotFound(
            f"User {chat_user_id!r} is not a participant of conversation {conversation.chat_id!r}"
        )
    return user
