"""Conversations: those a chat user takes part in (by chat id), and those a
bot owns (by runtime id). An unknown conversation a path names is 404, one a
body names is MissingReference; one the chat user is not in is 403."""

from functools import cache

from django.db import connection
from django.db.models import Exists, OuterRef, QuerySet
from django.http import QueryDict

from bots.models import Bot, Conversation, Participant, User
from chat.filters import participant_ids_param
from chat.keys import is_chat_id
from chat.selectors.bot_lists import bot_list_page
from chat.selectors.participants import not_a_participant, takes_part
from platform_site.foundation.domain_errors import MalformedId, MissingReference, NotFound
from platform_site.foundation.lookups import object_get
from platform_site.foundation.pagination import Page, PageRequest, paginate
from platform_site.foundation.sql.row_select import column_count, instance_from_row, select_list
from platform_site.foundation.tags import tag_filters


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
    """What chat_conversation_reference answers (and refuses), with the user's
    whole profile, in one query written once: the hottest chat write starts
    with both. (A user deleted since the request was authenticated takes part
    in nothing: 403, as chat_conversation_reference answers then.)"""
    with connection.cursor() as cursor:
        cursor.execute(_reference_and_author_sql(), [user.pk, user.pk, user.bot_id, chat_id])
        row = cursor.fetchone()
    if row is None:
        raise _no_such_reference(chat_id)
    if not row[-1]:
        raise not_a_participant(chat_id)
    split = column_count(Conversation)
    # A participant's user exists: participations go with their user.
    assert row[split] is not None
    conversation = instance_from_row(Conversation, row[:split])
    author = instance_from_row(User, row[split:-1])
    return conversation, author  # type: ignore[return-value]


def _no_such_reference(chat_id: str) -> MissingReference:
    return MissingReference(f"conversationId: conversation {chat_id!r} does not exist")


def _conversation_find(*, user: User, chat_id: str) -> Conversation | None:
    """The conversation of the user's bot with this chat id, annotated with
    `is_participant`: one query for both questions."""
    return (
        Conversation.objects.filter(bot_id=user.bot_id, chat_id=chat_id)
        .annotate(is_participant=takes_part(user))
        .first()
    )


def chat_conversation_get(*, user: User, chat_id: str) -> Conversation:
    """The conversation a path names, if the user takes part in it."""
    if not is_chat_id(chat_id):
        raise MalformedId(f"{chat_id[:80]!r} is not a conversation id")
    conversation = _conversation_find(user=user, chat_id=chat_id)
    if conversation is None:
        raise NotFound(f"Conversation {chat_id!r} not found")
    if not conversation.is_participant:  # type: ignore[attr-defined]
        raise not_a_participant(chat_id)
    return conversation


def chat_conversation_reference(*, user: User, chat_id: str) -> Conversation:
    """The conversation a body's `conversationId` names, if the user takes part in it."""
    conversation = chat_conversation_find(user=user, chat_id=chat_id)
    if conversation is None:
        raise _no_such_reference(chat_id)
    return conversation


def chat_conversation_find(*, user: User, chat_id: str) -> Conversation | None:
    """The conversation with this chat id, or None; 403 when it exists and
    the user does not take part in it."""
    conversation = _conversation_find(user=user, chat_id=chat_id)
    if conversation is not None and not conversation.is_participant:  # type: ignore[attr-defined]
        raise not_a_participant(chat_id)
    return conversation


def chat_conversations_list(*, user: User, page: PageRequest) -> Page[Conversation]:
    """The conversations the user takes part in, newest first."""
    return paginate(
        Conversation.objects.filter(participants__user=user),
        ordering=["-id"],
        list_name=f"chat-conversations:{user.id}",
        request=page,
    )


def _runtime_conversations() -> QuerySet[Conversation]:
    # The runtime API shows a conversation's integration by its name.
    return Conversation.objects.select_related("integration__integration")


def conversation_get(*, bot: Bot, conversation_id: str, for_update: bool = False) -> Conversation:
    """A conversation of the bot; `for_update`: locked until the transaction ends."""
    conversations = _runtime_conversations()
    if for_update:
        conversations = conversations.select_for_update(of=("self",))
    return object_get(
        conversations, object_id=conversation_id, prefix="conv", noun="conversation", bot=bot
    )


def conversations_list(*, bot: Bot, query: QueryDict, page: PageRequest) -> Page[Conversation]:
    """The bot's conversations, newest first; with `participantIds`, those
    that every one of these users takes part in."""
    tags = tag_filters(query)
    participant_ids = participant_ids_param(query)
    conversations = _runtime_conversations().filter(bot=bot)
    for user_id in participant_ids:
        conversations = conversations.filter(
            Exists(Participant.objects.filter(conversation=OuterRef("pk"), user_id=user_id))
        )
    return bot_list_page(
        conversations,
        bot=bot,
        noun="conversations",
        tags=tags,
        filters={"participantIds": participant_ids},
        page=page,
    )
