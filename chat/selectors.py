"""Reading what a chat user may see: the conversations they take part in, and
what is in them. Unknown objects are 404 (or ReferenceNotFound when a body
names them); objects of a conversation the caller is not in are 403."""

from functools import cache

from django.db import connection
from django.db.models import Exists, OuterRef, QuerySet

from bots.models import Conversation, Message, Participant, User
from chat.authentication import USER_KEY_CHALLENGE
from chat.event_types import CUSTOM_EVENT
from chat.keys import is_chat_id
from events.models import Event
from platform_site.api.errors import (
    Forbidden,
    InvalidIdentifier,
    ReferenceNotFound,
    ResourceNotFound,
    Unauthorized,
)
from platform_site.api.ids import is_id
from platform_site.api.pagination import Page, PageRequest, paginate
from platform_site.row_select import column_count, instance_from_row, select_list


def chat_user_profile(*, user: User) -> User:
    """The key's user with their whole profile: authentication finds who they
    are, not what they are called."""
    profile = User.objects.filter(pk=user.pk).first()
    if profile is None:  # deleted since the request was authenticated
        raise Unauthorized(
            "The user key names a user that does not exist",
            headers={"WWW-Authenticate": USER_KEY_CHALLENGE},
        )
    return profile


@cache
def _reference_and_author_sql() -> str:
    quote = connection.ops.quote_name
    return (
        f"SELECT {select_list(Conversation, 'c')}, {select_list(User, 'u')},"
        f" EXISTS (SELECT 1 FROM {quote(Participant._meta.db_table)} p"
        f" WHERE p.{quote('conversation_id')} = c.{quote('id')}"
        f" AND p.{quote('user_id')} = %s)"
        f" FROM {quote(Conversation._meta.db_table)} c"
        f" LEFT JOIN {quote(User._meta.db_table)} u ON u.{quote('id')} = %s"
        f" WHERE c.{quote('bot_id')} = %s AND c.{quote('chat_id')} = %s"
    )


def conversation_reference_and_author(*, user: User, chat_id: str) -> tuple[Conversation, User]:
    """What conversation_reference and chat_user_profile answer (and refuse),
    in one query written once: the hottest chat write starts with both. (A
    user deleted since the request was authenticated takes part in nothing:
    403, as conversation_reference answers then.)"""
    with connection.cursor() as cursor:
        cursor.execute(_reference_and_author_sql(), [user.pk, user.pk, user.bot_id, chat_id])
        row = cursor.fetchone()
    if row is None:
        raise ReferenceNotFound(f"conversationId: conversation {chat_id!r} does not exist")
    if not row[-1]:
        raise _not_a_participant(chat_id)
    split = column_count(Conversation)
    # A participant's user exists: participations go with their user.
    assert row[split] is not None
    conversation = instance_from_row(Conversation, row[:split])
    author = instance_from_row(User, row[split:-1])
    return conversation, author  # type: ignore[return-value]


def _takes_part(user: User, conversation: str = "pk") -> Exists:
    """Whether `user` takes part in the conversation of the row (at `conversation`)."""
    return Exists(Participant.objects.filter(conversation=OuterRef(conversation), user=user))


def _not_a_participant(chat_id: str) -> Forbidden:
    return Forbidden(f"You are not a participant of conversation {chat_id!r}")


def _conversation_find(*, user: User, chat_id: str) -> Conversation | None:
    """The conversation of the user's bot with this chat id, annotated with
    `is_participant`: one query for both questions."""
    return (
        Conversation.objects.filter(bot_id=user.bot_id, chat_id=chat_id)
        .annotate(is_participant=_takes_part(user))
        .first()
    )


def conversation_get(*, user: User, chat_id: str) -> Conversation:
    """The conversation a path names, if the user takes part in it."""
    if not is_chat_id(chat_id):
        raise InvalidIdentifier(f"{chat_id[:80]!r} is not a conversation id")
    conversation = _conversation_find(user=user, chat_id=chat_id)
    if conversation is None:
        raise ResourceNotFound(f"Conversation {chat_id!r} not found")
    if not conversation.is_participant:  # type: ignore[attr-defined]
        raise _not_a_participant(chat_id)
    return conversation


def conversation_reference(*, user: User, chat_id: str) -> Conversation:
    """The conversation a body's `conversationId` names, if the user takes part in it."""
    conversation = _conversation_find(user=user, chat_id=chat_id)
    if conversation is None:
        raise ReferenceNotFound(f"conversationId: conversation {chat_id!r} does not exist")
    if not conversation.is_participant:  # type: ignore[attr-defined]
        raise _not_a_participant(chat_id)
    return conversation


def conversation_find_for_user(*, user: User, chat_id: str) -> Conversation | None:
    """The conversation with this chat id, or None; 403 when it exists and
    the user does not take part in it."""
    conversation = _conversation_find(user=user, chat_id=chat_id)
    if conversation is not None and not conversation.is_participant:  # type: ignore[attr-defined]
        raise _not_a_participant(chat_id)
    return conversation


def conversations_list(*, user: User, page: PageRequest) -> Page[Conversation]:
    """The conversations the user takes part in, newest first."""
    return paginate(
        Conversation.objects.filter(participants__user=user),
        ordering=["-id"],
        list_name=f"chat-conversations:{user.id}",
        request=page,
    )


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
        raise InvalidIdentifier(f"{chat_user_id[:80]!r} is not a user id")
    user = User.objects.filter(
        bot_id=conversation.bot_id, chat_id=chat_user_id, participations__conversation=conversation
    ).first()
    if user is None:
        raise ResourceNotFound(
            f"User {chat_user_id!r} is not a participant of conversation {conversation.chat_id!r}"
        )
    return user


def _messages() -> QuerySet[Message]:
    return Message.objects.select_related("user", "conversation")


def messages_list(*, conversation: Conversation, page: PageRequest) -> Page[Message]:
    """The conversation's messages, users' and bot's alike, newest first."""
    return paginate(
        _messages().filter(conversation=conversation),
        ordering=["-id"],
        list_name=f"chat-messages:{conversation.id}",
        request=page,
    )


def message_get(*, user: User, message_id: str) -> Message:
    """A message of a conversation the user takes part in."""
    if not is_id(message_id, "msg"):
        raise InvalidIdentifier(f"{message_id[:80]!r} is not a message id")
    message = (
        _messages()
        .filter(bot_id=user.bot_id, id=message_id)
        .annotate(is_participant=_takes_part(user, "conversation"))
        .first()
    )
    if message is None:
        raise ResourceNotFound(f"Message {message_id!r} not found")
    if not message.is_participant:
        raise Forbidden(f"Message {message_id!r} is in a conversation you do not take part in")
    return message


def chat_event_get(*, user: User, event_id: str) -> Event:
    """A custom event of a user in a conversation the caller takes part in.
    The bot's other events (such as message_created, whose payload holds
    runtime ids) are not the chat interface's to show."""
    if not is_id(event_id, "evt"):
        raise InvalidIdentifier(f"{event_id[:80]!r} is not an event id")
    event = (
        Event.objects.select_related("user", "conversation")
        .filter(
            bot_id=user.bot_id,
            id=event_id,
            type=CUSTOM_EVENT,
            conversation__isnull=False,
            user__isnull=False,
        )
        .annotate(is_participant=_takes_part(user, "conversation"))
        .first()
    )
    if event is None:
        raise ResourceNotFound(f"Event {event_id!r} not found")
    if not event.is_participant:
        raise Forbidden(f"Event {event_id!r} is in a conversation you do not take part in")
    return event
