"""User keys: HS256 JWTs whose payload is {"id": <chat user id>}, signed with
the chat connection's encryption key."""

import re
import time
from datetime import datetime
from functools import lru_cache
from typing import Any

import jwt

from chat.models import ChatConnection

CHAT_ID_MAX_LENGTH = 70
# A caller-chosen chat id of a user or conversation. ASCII only: the id travels
# in URL paths and must compare equal however a client normalises Unicode.
CHAT_ID_RE = re.compile(rf"[A-Za-z0-9_/-]{{1,{CHAT_ID_MAX_LENGTH}}}")


class InvalidUserKey(Exception):
    pass


def is_chat_id(value: object) -> bool:
    return isinstance(value, str) and CHAT_ID_RE.fullmatch(value) is not None


def user_key_issue(
    *, connection: ChatConnection, chat_user_id: str, expires_at: datetime | None = None
) -> str:
    """A key for the user; with `expires_at`, one refused from then on (`exp`)."""
    claims: dict[str, Any] = {"id": chat_user_id}
    if expires_at is not None:
        claims["exp"] = expires_at
    return jwt.encode(claims, connection.encryption_key, algorithm="HS256")


def user_key_read(*, connection: ChatConnection, key: str) -> str:
    """The chat user id a key names, once its signature (and expiry, if it
    has one) checks out."""
    chat_user_id, expires = _key_checked(key, connection.encryption_key)
    if expires is not None and expires <= time.time():
        raise InvalidUserKey("The user key has expired")
    return chat_user_id


# A chat user sends the same key with every request: its signature is
# checked once per process (and per signing key, so a new key of the chat
# refuses the old ones at once), its expiry at every use. Only a key that
# checked out is kept.
@lru_cache(maxsize=4096)
def _key_checked(key: str, secret: str) -> tuple[str, float | None]:
    try:
        claims: dict[str, Any] = jwt.decode(
            key, secret, algorithms=["HS256"], options={"require": ["id"]}
        )
    except jwt.ExpiredSignatureError:
        raise InvalidUserKey("The user key has expired") from None
    except jwt.InvalidTokenError:
        raise InvalidUserKey("The user key is malformed or not signed for this chat") from None
    chat_user_id = claims["id"]
    if not is_chat_id(chat_user_id):
        raise InvalidUserKey(
            "The user key does not name a user: its id must be 1 to "
            f"{CHAT_ID_MAX_LENGTH} letters, digits, '_', '-' or '/'"
        )
    expires = claims.get("exp")
    return chat_user_id, None if expires is None else float(expires)


def signed_object_read(*, connection: ChatConnection, token: str) -> dict[str, Any]:
    """The claims of an HS256 JWT signed with the connection's key (the
    official webchat's signed `userData`); InvalidUserKey when it is not."""
    try:
        claims: dict[str, Any] = jwt.decode(token, connection.encryption_key, algorithms=["HS256"])
    except jwt.ExpiredSignatureError:
        raise InvalidUserKey("The token has expired") from None
    except jwt.InvalidTokenError:
        raise InvalidUserKey("The token is malformed or not signed with this chat's key") from None
    return claims
