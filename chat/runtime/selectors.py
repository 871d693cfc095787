"""Reading a bot's messages, conversations and users: only the bot's own."""

from typing import Any, TypeVar

from django.db.models import Exists, Model, OuterRef
from django.http import QueryDict

from bots.models import Bot, Conversation, Message, Participant, User
from chat.runtime.filters import MessageFilter, UserFilter, participant_ids_param
from platform_site.api.errors import InvalidIdentifier, ResourceNotFound
from platform_site.api.ids import is_id
from platform_site.api.pagination import Page, PageRequest, paginate
from platform_site.api.query import filter_query
from platform_site.api.tags import tag_filters, tagged

ModelT = TypeVar("ModelT", bound=Model)

# Newest first: ids are ULIDs, which sort by creation time, and are unique.
NEWEST_FIRST = ["-id"]


def _get(model: type[ModelT], *, bot: Bot, object_id: str, prefix: str, noun: str) -> ModelT:
    if not is_id(object_id, prefix):
        raise InvalidIdentifier(f"{object_id[:40]!r} is not a {noun} id")
    found = model._default_manager.filter(bot=bot, id=object_id).first()
    if found is None:
        raise ResourceNotFound(f"{noun.capitalize()} {object_id!r} not found")
    return found


def _list_name(noun: str, bot: Bot, **filters: Any) -> str:
    # The filters name the list: a token of one filtered list is no position in another.
    return f"{noun}:{bot.id}:{sorted((k, str(v)) for k, v in filters.items())}"


def message_get(*, bot: Bot, message_id: str) -> Message:
    return _get(Message, bot=bot, object_id=message_id, prefix="msg", noun="message")


def messages_list(*, bot: Bot, query: QueryDict, page: PageRequest) -> Page[Message]:
    """The bot's messages, newest first, of one conversation when `conversationId` is given."""
    tags = tag_filters(query)
    messages, filters = filter_query(MessageFilter, query, Message.objects.filter(bot=bot))
    return paginate(
        tagged(messages, tags),
        ordering=NEWEST_FIRST,
        list_name=_list_name("messages", bot, **filters, tags=sorted(tags.items())),
        request=page,
    )


def conversation_get(*, bot: Bot, conversation_id: str) -> Conversation:
    return _get(
        Conversation, bot=bot, object_id=conversation_id, prefix="conv", noun="conversation"
    )


def conversations_list(*, bot: Bot, query: QueryDict, page: PageRequest) -> Page[Conversation]:
    """The bot's conversations, newest first; with `participantIds`, those
    that every one of these users takes part in."""
    tags = tag_filters(query)
    participant_ids = participant_ids_param(query)
    conversations = tagged(Conversation.objects.filter(bot=bot), tags)
    for user_id in participant_ids:
        conversations = conversations.filter(
            Exists(Participant.objects.filter(conversation=OuterRef("pk"), user_id=user_id))
        )
    return paginate(
        conversations,
        ordering=NEWEST_FIRST,
        list_name=_list_name(
            "conversations", bot, participantIds=participant_ids, tags=sorted(tags.items())
        ),
        request=page,
    )


def user_get(*, bot: Bot, user_id: str) -> User:
    return _get(User, bot=bot, object_id=user_id, prefix="user", noun="user")


def users_list(*, bot: Bot, query: QueryDict, page: PageRequest) -> Page[User]:
    """The bot's users, newest first; with `conversationId`, the participants of it."""
    tags = tag_filters(query)
    users, filters = filter_query(UserFilter, query, User.objects.filter(bot=bot))
    return paginate(
        tagged(users, tags),
        ordering=NEWEST_FIRST,
        list_name=_list_name("users", bot, **filters, tags=sorted(tags.items())),
        request=page,
    )
