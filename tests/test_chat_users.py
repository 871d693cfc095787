"""The chat interface's users: POST /users, /users/me, /users/get-or-create,
the key modes of a connection, and the four ways a key is refused."""

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import pytest
from rest_framework.test import APIClient

from bots.models import Conversation, Message, Participant, User
from chat.models import ChatConnection, UserKeyMode
from tests.conftest import assert_error
from tests.factories import (
    AccountFactory,
    BotFactory,
    ChatConnectionFactory,
    ConversationFactory,
    MessageFactory,
    ParticipantFactory,
    UserFactory,
    user_key,
)

pytestmark = pytest.mark.django_db

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture
def connection(bot) -> ChatConnection:
    return ChatConnectionFactory(bot=bot)


@pytest.fixture
def manual(bot) -> ChatConnection:
    return ChatConnectionFactory(bot=bot, user_key_mode=UserKeyMode.MANUAL)


def base(connection: ChatConnection) -> str:
    return f"/chat/{connection.webhook_id}"


def signed(connection: ChatConnection, chat_user_id: Any, **claims: Any) -> str:
    """A key as an operator's service signs it in manual mode."""
    return jwt.encode({"id": chat_user_id, **claims}, connection.encryption_key, algorithm="HS256")


def keyed(key: str) -> APIClient:
    return APIClient(HTTP_X_USER_KEY=key)


def assert_unauthorized(response: Any) -> dict[str, Any]:
    body = assert_error(response, 401, "Unauthorized")
    assert response.headers["WWW-Authenticate"] == 'UserKey header="x-user-key"'
    return body


# --- POST /users ------------------------------------------------------------


@pytest.mark.parametrize("body", [None, {}], ids=["no body", "empty object"])
def test_create_user_without_choosing_anything(api_client, connection, body):
    response = api_client.post(f"{base(connection)}/users", body, format="json")
    assert response.status_code == 201, response.content
    answer = response.json()
    assert set(answer) == {"user", "key"}
    user = answer["user"]
    assert set(user) == {"id", "createdAt", "updatedAt"}
    assert user["id"].startswith("user_")
    assert TIMESTAMP.match(user["createdAt"]) and TIMESTAMP.match(user["updatedAt"])
    row = User.objects.get(chat_id=user["id"])
    # Not chosen: the chat id is the runtime id, and no chat:id tag is needed.
    assert row.id == user["id"]
    assert row.bot_id == connection.bot_id
    assert row.tags == {}
    me = keyed(answer["key"]).get(f"{base(connection)}/users/me")
    assert me.status_code == 200, me.content
    assert me.json() == {"user": user}


def test_create_user_with_no_body_and_no_content_type(connection):
    # What `curl -X POST` sends.
    response = APIClient().generic("POST", f"{base(connection)}/users", content_type="")
    assert response.status_code == 201, response.content


def test_create_user_with_everything(api_client, connection):
    body = {
        "id": "team/alice_01-x",
        "name": "Alice",
        "pictureUrl": "https://example.com/alice.png",
        "profile": "VIP customer",
    }
    response = api_client.post(f"{base(connection)}/users", body, format="json")
    assert response.status_code == 201, response.content
    user = response.json()["user"]
    assert set(user) == {"id", "name", "pictureUrl", "profile", "createdAt", "updatedAt"}
    assert (user["id"], user["name"], user["pictureUrl"], user["profile"]) == (
        "team/alice_01-x",
        "Alice",
        "https://example.com/alice.png",
        "VIP customer",
    )
    row = User.objects.get(chat_id="team/alice_01-x")
    assert row.id.startswith("user_") and row.id != row.chat_id
    assert row.tags == {"chat:id": "team/alice_01-x"}
    assert jwt.decode(response.json()["key"], connection.encryption_key, algorithms=["HS256"]) == {
        "id": "team/alice_01-x"
    }


def test_create_user_with_a_taken_id_is_409(api_client, connection):
    UserFactory(bot=connection.bot, chat_id="alice")
    response = api_client.post(f"{base(connection)}/users", {"id": "alice"}, format="json")
    body = assert_error(response, 409, "AlreadyExists")
    assert "alice" in body["message"]
    # The failed insert was rolled back to its savepoint: the connection still works.
    assert User.objects.filter(chat_id="alice").count() == 1


def test_the_same_id_in_another_bot_is_free(api_client, connection):
    UserFactory(bot=BotFactory(), chat_id="alice")
    response = api_client.post(f"{base(connection)}/users", {"id": "alice"}, format="json")
    assert response.status_code == 201, response.content


def test_an_id_of_70_characters_is_accepted(api_client, connection):
    response = api_client.post(f"{base(connection)}/users", {"id": "a" * 70}, format="json")
    assert response.status_code == 201, response.content


@pytest.mark.parametrize(
    "chat_id", ["", "a" * 71, "with space", "émile", "a@b", "a.b", "a\u200bb", 5, None, ["a"]]
)
def test_create_user_with_a_bad_id_is_400(api_client, connection, chat_id):
    response = api_client.post(f"{base(connection)}/users", {"id": chat_id}, format="json")
    body = assert_error(response, 400, "InvalidPayload")
    assert body["message"].startswith("id:")
    assert not User.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": 5}, "name"),
        ({"name": "n" * 201}, "name"),
        ({"pictureUrl": "not a url"}, "pictureUrl"),
        ({"pictureUrl": "ftp://example.com/a.png"}, "pictureUrl"),
        ({"pictureUrl": "https://example.com/" + "a" * 2000}, "pictureUrl"),
        ({"profile": {"a": 1}}, "profile"),
        ({"profile": "p" * 1001}, "profile"),
        ({"email": "a@example.com"}, "email"),
    ],
)
def test_create_user_with_a_bad_field_is_400(api_client, connection, body, field):
    response = api_client.post(f"{base(connection)}/users", body, format="json")
    assert assert_error(response, 400, "InvalidPayload")["message"].startswith(f"{field}:")
    assert not User.objects.exists()


def test_create_user_ignores_a_key_sent_anyway(api_client, connection):
    # POST /users needs no key; a stale one sent by habit does not make it fail.
    response = keyed("stale").post(f"{base(connection)}/users", {}, format="json")
    assert response.status_code == 201, response.content


def test_create_user_of_unknown_webhook_is_404(api_client):
    response = api_client.post("/chat/00000000-0000-0000-0000-000000000000/users", {})
    assert_error(response, 404, "ResourceNotFound")


def test_create_user_in_manual_mode_is_401(api_client, manual):
    response = api_client.post(f"{base(manual)}/users", {"id": "alice"}, format="json")
    body = assert_unauthorized(response)
    assert "get-or-create" in body["message"]
    assert not User.objects.exists()


def test_key_mode_is_editable_in_the_admin(client, connection):
    client.force_login(AccountFactory(is_staff=True, is_superuser=True))
    url = f"/admin/chat/chatconnection/{connection.pk}/change/"
    page = client.get(url)
    assert page.status_code == 200
    assert b'name="user_key_mode"' in page.content
    form = {
        "bot": connection.bot_id,
        "name": "Web",
        "encryption_key": connection.encryption_key,
        "user_key_mode": "manual",
    }
    response = client.post(url, form)
    assert response.status_code == 302, response.content
    connection.refresh_from_db()
    assert connection.user_key_mode == UserKeyMode.MANUAL


# --- /users/me --------------------------------------------------------------


@pytest.fixture
def alice(connection) -> User:
    return UserFactory(
        bot=connection.bot,
        chat_id="alice",
        name="Alice",
        picture_url="https://example.com/a.png",
        profile="regular",
    )


def me(connection: ChatConnection, user: User) -> tuple[APIClient, str]:
    return keyed(user_key(connection, user)), f"{base(connection)}/users/me"


def test_get_me(connection, alice):
    client, url = me(connection, alice)
    response = client.get(url)
    assert response.status_code == 200, response.content
    assert response.json() == {
        "user": {
            "id": "alice",
            "name": "Alice",
            "pictureUrl": "https://example.com/a.png",
            "profile": "regular",
            "createdAt": response.json()["user"]["createdAt"],
            "updatedAt": response.json()["user"]["updatedAt"],
        }
    }


def test_update_me_changes_only_what_is_given(connection, alice):
    client, url = me(connection, alice)
    before = User.objects.get(pk=alice.pk).updated_at
    response = client.put(url, {"name": "Alice B."}, format="json")
    assert response.status_code == 200, response.content
    user = response.json()["user"]
    assert (user["name"], user["pictureUrl"], user["profile"]) == (
        "Alice B.",
        "https://example.com/a.png",
        "regular",
    )
    row = User.objects.get(pk=alice.pk)
    assert row.name == "Alice B."
    assert row.updated_at > before


def test_update_me_with_empty_strings_clears_fields(connection, alice):
    client, url = me(connection, alice)
    response = client.put(url, {"pictureUrl": "", "profile": ""}, format="json")
    assert response.status_code == 200, response.content
    assert set(response.json()["user"]) == {"id", "name", "createdAt", "updatedAt"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": None}, "name"),
        ({"pictureUrl": "javascript:alert(1)"}, "pictureUrl"),
        ({"id": "bob"}, "id"),
        ({"profile": 1}, "profile"),
    ],
)
def test_update_me_with_a_bad_field_is_400(connection, alice, body, field):
    client, url = me(connection, alice)
    response = client.put(url, body, format="json")
    assert assert_error(response, 400, "InvalidPayload")["message"].startswith(f"{field}:")
    assert User.objects.get(pk=alice.pk).name == "Alice"


def test_update_me_with_a_body_that_is_not_json_is_400(connection, alice):
    client, url = me(connection, alice)
    response = client.put(url, "{", content_type="application/json")
    assert_error(response, 400, "InvalidPayload")


def test_delete_me(connection, alice):
    conversation = ConversationFactory(bot=connection.bot, chat_id="mine", owner=alice)
    ParticipantFactory(conversation=conversation, user=alice)
    bob = UserFactory(bot=connection.bot, chat_id="bob")
    ParticipantFactory(conversation=conversation, user=bob)
    MessageFactory(conversation=conversation, user=alice)
    kept = MessageFactory(conversation=conversation, user=bob)
    client, url = me(connection, alice)

    response = client.delete(url)
    assert response.status_code == 200, response.content
    assert response.json() == {}
    assert not User.objects.filter(pk=alice.pk).exists()
    assert list(Message.objects.values_list("id", flat=True)) == [kept.id]
    assert list(Participant.objects.values_list("user_id", flat=True)) == [bob.id]
    # The conversation stays for the others, without an owner.
    assert Conversation.objects.get(pk=conversation.pk).owner is None
    # The key now names a user that does not exist.
    assert_unauthorized(client.get(url))


@pytest.mark.parametrize("method", ["post", "patch"])
def test_other_methods_on_me_are_405(connection, alice, method):
    client, url = me(connection, alice)
    assert_error(getattr(client, method)(url, {}, format="json"), 405, "MethodNotFound")


# --- the four ways a key is refused -----------------------------------------


def refused_keys(connection: ChatConnection, user: User) -> dict[str, str]:
    other = ChatConnectionFactory(bot=connection.bot)
    return {
        "expired": signed(connection, user.chat_id, exp=datetime.now(UTC) - timedelta(seconds=5)),
        "wrong signature": jwt.encode(
            {"id": user.chat_id}, "a different secret of enough bytes!", algorithm="HS256"
        ),
        "another connection": user_key(other, user),
    }


@pytest.mark.parametrize("case", ["expired", "wrong signature", "another connection"])
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/users/me"),
        ("put", "/users/me"),
        ("delete", "/users/me"),
        ("get", "/conversations"),
    ],
)
def test_refused_key_is_401(connection, alice, case, method, path):
    key = refused_keys(connection, alice)[case]
    response = getattr(keyed(key), method)(f"{base(connection)}{path}", {}, format="json")
    assert_unauthorized(response)
    assert User.objects.get(pk=alice.pk).name == "Alice"


def test_key_of_a_deleted_user_is_401(connection, alice):
    key = user_key(connection, alice)
    alice.delete()
    assert_unauthorized(keyed(key).get(f"{base(connection)}/users/me"))


def test_missing_key_is_401(api_client, connection):
    assert_unauthorized(api_client.get(f"{base(connection)}/users/me"))


@pytest.mark.parametrize("chat_user_id", ["a b", "a" * 71, "é", "", 7, None])
def test_key_naming_no_valid_id_is_401(connection, chat_user_id):
    response = keyed(signed(connection, chat_user_id)).get(f"{base(connection)}/users/me")
    assert_unauthorized(response)


# --- POST /users/get-or-create ----------------------------------------------


def get_or_create(connection: ChatConnection, key: str, body: Any = None) -> Any:
    return keyed(key).post(f"{base(connection)}/users/get-or-create", body, format="json")


def test_get_or_create_finds_the_keys_user(connection, alice):
    response = get_or_create(connection, user_key(connection, alice), {"name": "Ignored"})
    assert response.status_code == 200, response.content
    assert response.json()["user"]["id"] == "alice"
    # A found user is answered as it is: the body only describes a user being made.
    assert response.json()["user"]["name"] == "Alice"
    assert User.objects.count() == 1


@pytest.mark.parametrize("mode", [UserKeyMode.MANUAL, UserKeyMode.AUTO])
def test_get_or_create_makes_the_user_a_signed_key_names(bot, mode):
    connection = ChatConnectionFactory(bot=bot, user_key_mode=mode)
    key = signed(connection, "crm/42")
    response = get_or_create(connection, key, {"name": "Carol", "profile": "from CRM"})
    assert response.status_code == 201, response.content
    user = response.json()["user"]
    assert (user["id"], user["name"], user["profile"]) == ("crm/42", "Carol", "from CRM")
    row = User.objects.get(bot=bot, chat_id="crm/42")
    assert row.id.startswith("user_")
    assert row.tags == {"chat:id": "crm/42"}
    # From then on the key works everywhere, and asking again finds the user.
    assert keyed(key).get(f"{base(connection)}/users/me").status_code == 200
    again = get_or_create(connection, key)
    assert again.status_code == 200, again.content
    assert again.json()["user"]["id"] == "crm/42"
    assert User.objects.count() == 1


def test_get_or_create_with_a_key_that_expires_later(manual):
    key = signed(manual, "dave", exp=datetime.now(UTC) + timedelta(hours=1))
    assert get_or_create(manual, key).status_code == 201


@pytest.mark.parametrize("case", ["expired", "wrong signature", "another connection"])
def test_get_or_create_with_a_refused_key_is_401(manual, case):
    user = UserFactory.build(bot=manual.bot, chat_id="erin")
    assert_unauthorized(get_or_create(manual, refused_keys(manual, user)[case]))
    assert not User.objects.exists()


@pytest.mark.parametrize("chat_user_id", ["a b", "x" * 71, "ü", 5, None])
def test_get_or_create_with_a_key_naming_no_valid_id_is_401(manual, chat_user_id):
    assert_unauthorized(get_or_create(manual, signed(manual, chat_user_id)))
    assert not User.objects.exists()


def test_get_or_create_without_a_key_is_401(api_client, manual):
    assert_unauthorized(api_client.post(f"{base(manual)}/users/get-or-create", {}, format="json"))


def test_get_or_create_with_a_bad_body_is_400(manual):
    response = get_or_create(manual, signed(manual, "frank"), {"id": "other"})
    assert_error(response, 400, "InvalidPayload")
    assert not User.objects.exists()
