"""Messages: those of the conversations a chat user takes part in, and those
of a bot's conversations, users' and bot's alike."""

from django.db.models import QuerySet
from django.http import QueryDict

from bots.models import Bot, Conversation, Message, User
from chat.filters import MessageFilter
from chat.selectors.bot_lists import bot_list_page
from chat.selectors.feedback import with_feedback
from chat.selectors.participants import participant_object_get
from platform_site.foundation.filtering import filter_query
from platform_site.foundation.lookups import object_get
from platform_site.foundation.pagination import Page, PageRequest, paginate
from platform_site.foundation.tags import tag_filters


def _chat_messages() -> QuerySet[Message]:
    # The chat interface shows messages by the chat ids of their user and conversation.
    return Message.objects.select_related("user", "conversation")


def chat_messages_list(
    *, conversation: Conversation, page: PageRequest, reader: User
) -> Page[Message]:
    """The conversation's messages, users' and bot's alike, newest first,
    each with the feedback the reader gave on it."""
    return paginate(
        with_feedback(_chat_messages(), user=reader).filter(conversation=conversation),
        ordering=["-id"],
        list_name=f"chat-messages:{conversation.id}",
        request=page,
    )


def chat_message_get(*, user: User, message_id: str) -> Message:
    """A message of a conversation the user takes part in, with the
    feedback they gave on it."""
    return participant_object_get(
        with_feedback(_chat_messages(), user=user),
        user=user,
        object_id=message_id,
        prefix="msg",
        noun="message",
    )


def message_get(*, bot: Bot, message_id: str) -> Message:
    return object_get(Message.objects, object_id=message_id, prefix="msg", noun="message", bot=bot)


def messages_list(*, bot: Bot, query: QueryDict, page: PageRequest) -> Page[Message]:
    """The bot's messages, newest first, of one conversation when `conversationId` is given."""
    tags = tag_filters(query)
    messages, filters = filter_query(MessageFilter, query, Message.objects.filter(bot=bot))
    return bot_list_page(messages, bot=bot, noun="messages", tags=tags, filters=filters, page=page)
