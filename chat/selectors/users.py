"""A bot's end users: the chat interface's key user, and the runtime API's users of a bot."""

from django.http import QueryDict

from bots.models import Bot, User
from chat.filters import UserFilter
from chat.selectors.bot_lists import bot_list_page
from platform_site.foundation.filtering import filter_query
from platform_site.foundation.lookups import object_get
from platform_site.foundation.pagination import Page, PageRequest
from platform_site.foundation.tags import tag_filters


def chat_user_profile(*, user: User) -> User | None:
    """The key's user with their whole profile (authentication finds who they
    are, not what they are called); None when they were deleted since the
    request was authenticated."""
    return User.objects.filter(pk=user.pk).first()


def chat_user_find(*, bot_id: str, chat_id: str) -> User | None:
    """The user of the bot with this chat id, if there is one."""
    return User.objects.filter(bot_id=bot_id, chat_id=chat_id).first()


def user_get(*, bot: Bot, user_id: str) -> User:
    return object_get(User.objects, object_id=user_id, prefix="user", noun="user", bot=bot)


def users_list(*, bot: Bot, query: QueryDict, page: PageRequest) -> Page[User]:
    """The bot's users, newest first; with `conversationId`, the participants of it."""
    tags = tag_filters(query)
    users, filters = filter_query(UserFilter, query, User.objects.filter(bot=bot))
    return bot_list_page(users, bot=bot, noun="users", tags=tags, filters=filters, page=page)
