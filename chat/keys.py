"""User keys: HS256 JWTs whose payload is {"id": <chat user id>}, signed with
the chat connection's encryption key."""

from typing import Any

import jwt

from chat.models import ChatConnection

CHAT_ID_MAX_LENGTH = 70


class InvalidUserKey(Exception):
    pass


def user_key_issue(*, connection: ChatConnection, chat_user_id: str) -> str:
    return jwt.encode({"id": chat_user_id}, connection.encryption_key, algorithm="HS256")


def user_key_read(*, connection: ChatConnection, key: str) -> str:
    """The chat user id a key names, once its signature (and expiry, if it
    has one) checks out."""
    try:
        claims: dict[str, Any] = jwt.decode(
            key, connection.encryption_key, algorithms=["HS256"], options={"require": ["id"]}
        )
    except jwt.ExpiredSignatureError:
        raise InvalidUserKey("The user key has expired") from None
    except jwt.InvalidTokenError:
        raise InvalidUserKey("The user key is malformed or not signed for this chat") from None
    chat_user_id = claims["id"]
    if (
        not isinstance(chat_user_id, str)
        or not 0 < len(chat_user_id) <= CHAT_ID_MAX_LENGTH
        # Refuses NUL and lone surrogates, which no database column can hold.
        or not chat_user_id.isprintable()
    ):
        raise InvalidUserKey("The user key does not name a user")
    return chat_user_id
