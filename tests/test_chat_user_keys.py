"""A user key's signature is checked once per process (chat/keys.py); what
is checked at every use still refuses it: its expiry, the chat's signing
key, a user that is gone."""

import time
from unittest import mock

import jwt
import pytest
from rest_framework.test import APIClient

from chat.keys import InvalidUserKey, user_key_read
from chat.models import ChatConnection, new_encryption_key
from tests.conftest import assert_error
from tests.factories import ChatConnectionFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def connection(bot) -> ChatConnection:
    return ChatConnectionFactory(bot=bot)


def me(connection: ChatConnection, key: str):
    return APIClient(HTTP_X_USER_KEY=key).get(f"/chat/{connection.webhook_id}/users/me")


def test_a_key_accepted_once_is_refused_when_it_expires(connection):
    UserFactory(bot=connection.bot, chat_id="visitor-1")
    expires = int(time.time()) + 30
    key = jwt.encode({"id": "visitor-1", "exp": expires}, connection.encryption_key, "HS256")
    assert me(connection, key).status_code == 200
    with mock.patch("chat.keys.time.time", return_value=expires + 1):
        refused = me(connection, key)
    assert_error(refused, 401, "Unauthorized")
    assert refused.json()["message"] == "The user key has expired"


def test_a_key_is_refused_once_the_chat_signs_with_another(connection):
    UserFactory(bot=connection.bot, chat_id="visitor-2")
    key = jwt.encode({"id": "visitor-2"}, connection.encryption_key, "HS256")
    assert user_key_read(connection=connection, key=key) == "visitor-2"
    connection.encryption_key = new_encryption_key()
    with pytest.raises(InvalidUserKey, match="not signed for this chat"):
        user_key_read(connection=connection, key=key)


def test_a_refused_key_is_refused_every_time(connection):
    key = jwt.encode({"id": "visitor-3"}, "another chat's signing key, 32 bytes or more", "HS256")
    for _ in range(2):
        with pytest.raises(InvalidUserKey, match="not signed for this chat"):
            user_key_read(connection=connection, key=key)


def test_a_key_of_a_deleted_user_is_refused_after_it_was_accepted(connection):
    user = UserFactory(bot=connection.bot, chat_id="visitor-4")
    key = jwt.encode({"id": "visitor-4"}, connection.encryption_key, "HS256")
    assert me(connection, key).status_code == 200
    user.delete()
    assert_error(me(connection, key), 401, "Unauthorized")
