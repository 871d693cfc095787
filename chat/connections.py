"""Chat connections, their users and conversations as the chat interface makes them."""

from django.db import transaction

from bots.models import Bot, Conversation, Participant, User
from chat.keys import user_key_issue
from chat.models import ChatConnection
from platform_site.api.ids import new_id


def chat_connection_create(*, bot: Bot, name: str = "") -> ChatConnection:
    return ChatConnection.objects.create(bot=bot, name=name)


def chat_user_create(
    *, connection: ChatConnection, chat_id: str | None = None, name: str = ""
) -> tuple[User, str]:
    """A user of the connection's bot and a key for it. When the caller does
    not choose a chat id, the chat id is the runtime id."""
    user_id = new_id("user")
    user = User.objects.create(
        id=user_id,
        bot_id=connection.bot_id,
        chat_id=chat_id or user_id,
        name=name,
        tags={"chat:id": chat_id} if chat_id else {},
    )
    return user, user_key_issue(connection=connection, chat_user_id=user.chat_id)


@transaction.atomic
def conversation_create(*, creator: User, chat_id: str | None = None) -> Conversation:
    """A conversation whose creator is its owner and first participant."""
    conversation_id = new_id("conv")
    conversation = Conversation.objects.create(
        id=conversation_id,
        bot_id=creator.bot_id,
        chat_id=chat_id or conversation_id,
        owner=creator,
        tags={"chat:id": chat_id} if chat_id else {},
    )
    Participant.objects.create(conversation=conversation, user=creator)
    return conversation
