import hmac
from typing import Any

from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from chat.credentials import chat_user_for_key
from chat.keys import InvalidUserKey, user_key_read
from chat.models import ChatConnection
from chat.principals import ChatAdmin, ChatPrincipal, SignedKeyHolder, chat_connection
from platform_site.api.authentication import HeaderAuthentication

USER_KEY_CHALLENGE = 'UserKey header="x-user-key"'
ADMIN_SECRET_CHALLENGE = 'AdminSecret header="x-admin-secret"'


def _signed_key(request: Request) -> tuple[ChatConnection, str] | None:
    """The connection and the chat user id of the request's key, None when it
    sends none; AuthenticationFailed when the key is not signed for the
    connection the URL names, has expired, or names no valid id."""
    key = request.headers.get("x-user-key")
    if key is None:
        return None
    connection = chat_connection(request)
    try:
        return connection, user_key_read(connection=connection, key=key)
    except InvalidUserKey as exc:
        raise AuthenticationFailed(str(exc)) from None


class UserKeyAuthentication(HeaderAuthentication):
    """`x-user-key` naming an existing user of the connection's bot."""

    www_authenticate = USER_KEY_CHALLENGE

    def authenticate(self, request: Request) -> tuple[Any, ChatPrincipal] | None:
        signed = _signed_key(request)
        if signed is None:
            return None
        connection, chat_user_id = signed
        user = chat_user_for_key(connection=connection, chat_user_id=chat_user_id)
        if user is None:
            raise AuthenticationFailed("The user key names a user that does not exist")
        return user, ChatPrincipal(connection=connection, user=user)


class SignedUserKeyAuthentication(HeaderAuthentication):
    """`x-user-key` signed for the connection, whether or not its user exists
    yet: for POST /users/get-or-create, which makes the user."""

    www_authenticate = USER_KEY_CHALLENGE

    def authenticate(self, request: Request) -> tuple[Any, SignedKeyHolder] | None:
        signed = _signed_key(request)
        if signed is None:
            return None
        connection, chat_user_id = signed
        return None, SignedKeyHolder(connection=connection, chat_user_id=chat_user_id)


class AdminSecretAuthentication(HeaderAuthentication):
    """`x-admin-secret`: the connection's encryption key, as the official
    webchat sends it to have user keys made (POST users/key). Compared in
    constant time."""

    www_authenticate = ADMIN_SECRET_CHALLENGE

    def authenticate(self, request: Request) -> tuple[Any, ChatAdmin] | None:
        secret = request.headers.get("x-admin-secret")
        if secret is None:
            return None
        connection = chat_connection(request)
        if not hmac.compare_digest(secret.encode(), connection.encryption_key.encode()):
            raise AuthenticationFailed("The admin secret is not this chat's")
        return None, ChatAdmin(connection=connection)
