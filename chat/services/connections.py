from bots.models import Bot
from chat.models import ChatConnection, UserKeyMode


def chat_connection_create(
    *, bot: Bot, name: str = "", user_key_mode: str = UserKeyMode.AUTO
) -> ChatConnection:
    return ChatConnection.objects.create(bot=bot, name=name, user_key_mode=user_key_mode)
