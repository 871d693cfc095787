from typing import Any

from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from bots.models import User
from chat.keys import InvalidUserKey, user_key_read
from chat.models import ChatConnection
from chat.principals import ChatPrincipal
from platform_site.api.authentication import HeaderAuthentication


class UserKeyAuthentication(HeaderAuthentication):
    """`x-user-key` on the chat interface of the connection the URL names
    (ChatView puts it on the request before authentication runs)."""

    www_authenticate = 'UserKey header="x-user-key"'

    def authenticate(self, request: Request) -> tuple[Any, ChatPrincipal] | None:
        key = request.headers.get("x-user-key")
        if key is None:
            return None
        connection: ChatConnection = request.chat_connection  # type: ignore[attr-defined]
        try:
            chat_user_id = user_key_read(connection=connection, key=key)
        except InvalidUserKey as exc:
            raise AuthenticationFailed(str(exc)) from None
        user = User.objects.filter(bot_id=connection.bot_id, chat_id=chat_user_id).first()
        if user is None:
            raise AuthenticationFailed("The user key names a user that does not exist")
        return user, ChatPrincipal(connection=connection, user=user)
