"""What a chat request's URL and key stand for: the chat connection its
webhook id names, and the user of the connection's bot its key names. Both
are kept a short while per process (platform_site/foundation/credential_cache.py) as plain
values, from which each request builds its own instances."""

from typing import Any

from django.db import DEFAULT_DB_ALIAS

from bots.models import User
from chat.models import ChatConnection
from platform_site.foundation.credential_cache import CredentialCache

_CONNECTION_FIELDS = tuple(field.attname for field in ChatConnection._meta.concrete_fields)
# Who the user is, not their profile: views that show it read it (chat_user_profile).
_USER_FIELDS = ("id", "bot_id", "chat_id")

# Keyed by webhook id.
chat_connections: CredentialCache[tuple[Any, ...]] = CredentialCache("chat connections")
# Keyed by (the connection's bot id, chat user id): what the lookup reads by.
chat_users: CredentialCache[tuple[Any, ...]] = CredentialCache("chat users")


def chat_connection_for_webhook(webhook_id: str) -> ChatConnection | None:
    values = chat_connections.get(webhook_id)
    if values is None:
        fetch = chat_connections.fetch()
        values = (
            ChatConnection.objects.filter(webhook_id=webhook_id)
            .values_list(*_CONNECTION_FIELDS)
            .first()
        )
        if values is None:
            return None
        chat_connections.put(fetch, webhook_id, values)
    return ChatConnection.from_db(DEFAULT_DB_ALIAS, _CONNECTION_FIELDS, values)


def chat_user_for_key(*, connection: ChatConnection, chat_user_id: str) -> User | None:
    """The user of the connection's bot that a verified key names, holding
    only its ids (any other field loads on first use)."""
    key = (connection.bot_id, chat_user_id)
    values = chat_users.get(key)
    if values is None:
        fetch = chat_users.fetch()
        values = (
            User.objects.filter(bot_id=connection.bot_id, chat_id=chat_user_id)
            .values_list(*_USER_FIELDS)
            .first()
        )
        if values is None:
            return None
        chat_users.put(fetch, key, values)
    return User.from_db(DEFAULT_DB_ALIAS, _USER_FIELDS, values)
