"""The chat interface's conversations: create, get, list, get-or-create,
delete, ids with `/`, and who may do what."""

import re
from typing import Any

import pytest
from rest_framework.test import APIClient

from bots.models import Conversation, Message, Participant, User
from chat.models import ChatConnection
from tests.conftest import assert_error
from tests.factories import (
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


class _AnyTimestamp:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and TIMESTAMP.match(other) is not None


ANY_TIME: Any = _AnyTimestamp()


@pytest.fixture
def connection(bot) -> ChatConnection:
    return ChatConnectionFactory(bot=bot)


@pytest.fixture
def alice(bot) -> User:
    return UserFactory(bot=bot, chat_id="alice")


@pytest.fixture
def bob(bot) -> User:
    return UserFactory(bot=bot, chat_id="bob")


def as_user(connection: ChatConnection, user: User) -> APIClient:
    return APIClient(HTTP_X_USER_KEY=user_key(connection, user))


def url(connection: ChatConnection, path: str) -> str:
    return f"/chat/{connection.webhook_id}/{path}"


def conversation_of(owner: User, chat_id: str, *others: User) -> Conversation:
    conversation = ConversationFactory(bot=owner.bot, chat_id=chat_id, owner=owner)
    for user in (owner, *others):
        ParticipantFactory(conversation=conversation, user=user)
    return conversation


# --- POST /conversations ----------------------------------------------------


@pytest.mark.parametrize("body", [None, {}], ids=["no body", "empty object"])
def test_create_conversation(connection, alice, body):
    response = as_user(connection, alice).post(
        url(connection, "conversations"), body, format="json"
    )
    assert response.status_code == 201, response.content
    conversation = response.json()["conversation"]
    assert set(conversation) == {"id", "createdAt", "updatedAt"}
    assert conversation["id"].startswith("conv_")
    assert TIMESTAMP.match(conversation["createdAt"])
    row = Conversation.objects.get(chat_id=conversation["id"])
    assert row.id == conversation["id"]
    assert row.owner == alice
    assert row.tags == {}
    assert list(Participant.objects.filter(conversation=row).values_list("user", flat=True)) == [
        alice.id
    ]


def test_create_conversation_with_a_chosen_id(connection, alice):
    response = as_user(connection, alice).post(
        url(connection, "conversations"), {"id": "support/2026/ticket-7"}, format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["conversation"]["id"] == "support/2026/ticket-7"
    row = Conversation.objects.get(chat_id="support/2026/ticket-7")
    assert row.id.startswith("conv_")
    assert row.tags == {"chat:id": "support/2026/ticket-7"}


def test_create_conversation_with_a_taken_id_is_409(connection, alice, bob):
    conversation_of(bob, "taken")
    response = as_user(connection, alice).post(
        url(connection, "conversations"), {"id": "taken"}, format="json"
    )
    assert "taken" in assert_error(response, 409, "AlreadyExists")["message"]
    # Rolled back to the savepoint: no second participant, and queries still run.
    assert Conversation.objects.count() == 1
    assert Participant.objects.count() == 1


def test_the_same_conversation_id_in_another_bot_is_free(connection, alice):
    other_owner = UserFactory(bot=BotFactory(), chat_id="alice")
    conversation_of(other_owner, "shared-name")
    response = as_user(connection, alice).post(
        url(connection, "conversations"), {"id": "shared-name"}, format="json"
    )
    assert response.status_code == 201, response.content


@pytest.mark.parametrize("chat_id", ["", "x" * 71, "a b", "a?b", "ça", 12, None])
def test_create_conversation_with_a_bad_id_is_400(connection, alice, chat_id):
    response = as_user(connection, alice).post(
        url(connection, "conversations"), {"id": chat_id}, format="json"
    )
    assert assert_error(response, 400, "InvalidPayload")["message"].startswith("id:")
    assert not Conversation.objects.exists()


def test_create_conversation_with_an_unknown_field_is_400(connection, alice):
    response = as_user(connection, alice).post(
        url(connection, "conversations"), {"title": "x"}, format="json"
    )
    assert_error(response, 400, "InvalidPayload")


def test_create_conversation_without_a_key_is_401(api_client, connection):
    response = api_client.post(url(connection, "conversations"), {}, format="json")
    assert_error(response, 401, "Unauthorized")
    assert response.headers["WWW-Authenticate"]


# --- GET /conversations/{id} ------------------------------------------------


@pytest.mark.parametrize("chat_id", ["plain", "a/b", "a/b/c/d", "user/messages-x", "-_-"])
def test_get_conversation_by_an_id_that_may_hold_slashes(connection, alice, chat_id):
    conversation_of(alice, chat_id)
    response = as_user(connection, alice).get(url(connection, f"conversations/{chat_id}"))
    assert response.status_code == 200, response.content
    assert response.json()["conversation"]["id"] == chat_id


def test_get_conversation_as_a_participant_who_is_not_the_owner(connection, alice, bob):
    conversation_of(alice, "shared", bob)
    response = as_user(connection, bob).get(url(connection, "conversations/shared"))
    assert response.status_code == 200, response.content


def test_get_conversation_as_a_non_participant_is_403(connection, alice, bob):
    conversation_of(alice, "private")
    response = as_user(connection, bob).get(url(connection, "conversations/private"))
    assert "private" in assert_error(response, 403, "Forbidden")["message"]


def test_get_unknown_conversation_is_404(connection, alice):
    response = as_user(connection, alice).get(url(connection, "conversations/nope"))
    assert "nope" in assert_error(response, 404, "ResourceNotFound")["message"]


def test_conversation_of_another_bot_is_404(connection, alice):
    elsewhere = UserFactory(bot=BotFactory(), chat_id="alice")
    conversation_of(elsewhere, "theirs")
    response = as_user(connection, alice).get(url(connection, "conversations/theirs"))
    assert_error(response, 404, "ResourceNotFound")


@pytest.mark.parametrize("path", ["conversations/a%20b", "conversations/" + "x" * 71])
def test_a_path_id_that_cannot_be_a_conversation_id_is_400(connection, alice, path):
    response = as_user(connection, alice).get(url(connection, path))
    assert_error(response, 400, "InvalidIdentifier")


# --- GET /conversations -----------------------------------------------------


def test_list_conversations_shows_only_the_users_own_newest_first(connection, alice, bob):
    first = conversation_of(alice, "first")
    joined = conversation_of(bob, "joined", alice)
    conversation_of(bob, "not-mine")
    ConversationFactory(bot=BotFactory(), chat_id="other-bot")
    response = as_user(connection, alice).get(url(connection, "conversations"))
    assert response.status_code == 200, response.content
    assert response.json() == {
        "conversations": [
            {"id": "joined", "createdAt": ANY_TIME, "updatedAt": ANY_TIME},
            {"id": "first", "createdAt": ANY_TIME, "updatedAt": ANY_TIME},
        ],
        "meta": {},
    }
    assert joined.id > first.id


def walk(client: APIClient, path: str, items: str, page_size: int) -> list[list[str]]:
    pages: list[list[str]] = []
    token = None
    while True:
        query: dict[str, Any] = {"pageSize": page_size}
        if token:
            query["nextToken"] = token
        response = client.get(path, query)
        assert response.status_code == 200, response.content
        body = response.json()
        pages.append([item["id"] for item in body[items]])
        token = body["meta"].get("nextToken")
        if token is None:
            return pages


def test_list_conversations_in_pages(connection, alice):
    made = [conversation_of(alice, f"c-{n}") for n in range(7)]
    client = as_user(connection, alice)
    pages = walk(client, url(connection, "conversations"), "conversations", 3)
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [i for p in pages for i in p] == [c.chat_id for c in reversed(made)]


def test_conversations_added_while_paging_are_not_shown_twice(connection, alice):
    for n in range(4):
        conversation_of(alice, f"c-{n}")
    client = as_user(connection, alice)
    first = client.get(url(connection, "conversations"), {"pageSize": 2}).json()
    conversation_of(alice, "newer")
    rest = client.get(
        url(connection, "conversations"), {"pageSize": 10, "nextToken": first["meta"]["nextToken"]}
    ).json()
    seen = [c["id"] for c in first["conversations"] + rest["conversations"]]
    assert seen == ["c-3", "c-2", "c-1", "c-0"]


@pytest.mark.parametrize(
    "query",
    [{"nextToken": "tampered"}, {"pageSize": "0"}, {"pageSize": "201"}, {"pageSize": "x"}],
)
def test_list_conversations_with_a_bad_query_is_400(connection, alice, query):
    response = as_user(connection, alice).get(url(connection, "conversations"), query)
    assert_error(response, 400, "InvalidQuery")


def test_a_token_of_another_users_list_is_400(connection, alice, bob):
    for n in range(3):
        conversation_of(alice, f"a-{n}", bob)
    token = (
        as_user(connection, alice)
        .get(url(connection, "conversations"), {"pageSize": 1})
        .json()["meta"]["nextToken"]
    )
    response = as_user(connection, bob).get(url(connection, "conversations"), {"nextToken": token})
    assert_error(response, 400, "InvalidQuery")


def test_list_conversations_query_count(connection, alice, django_assert_num_queries):
    for n in range(5):
        conversation_of(alice, f"c-{n}")
    client = as_user(connection, alice)
    # The connection, the key's user, the workspace's rate limits (kept a
    # while by each process, like the first two), the page.
    with django_assert_num_queries(4):
        response = client.get(url(connection, "conversations"))
    assert len(response.json()["conversations"]) == 5


# --- POST /conversations/get-or-create --------------------------------------


def get_or_create(connection: ChatConnection, user: User, body: Any) -> Any:
    return as_user(connection, user).post(
        url(connection, "conversations/get-or-create"), body, format="json"
    )


def test_get_or_create_makes_a_conversation(connection, alice):
    response = get_or_create(connection, alice, {"id": "help/desk"})
    assert response.status_code == 201, response.content
    assert response.json()["conversation"]["id"] == "help/desk"
    row = Conversation.objects.get(chat_id="help/desk")
    assert row.owner == alice
    assert Participant.objects.filter(conversation=row, user=alice).exists()


def test_get_or_create_finds_a_conversation_the_user_takes_part_in(connection, alice, bob):
    conversation_of(bob, "help/desk", alice)
    response = get_or_create(connection, alice, {"id": "help/desk"})
    assert response.status_code == 200, response.content
    assert response.json()["conversation"]["id"] == "help/desk"
    assert Conversation.objects.count() == 1
    assert Conversation.objects.get().owner == bob


def test_get_or_create_of_a_conversation_of_others_is_403(connection, alice, bob):
    conversation_of(bob, "bobs")
    assert_error(get_or_create(connection, alice, {"id": "bobs"}), 403, "Forbidden")
    assert not Participant.objects.filter(user=alice).exists()


@pytest.mark.parametrize("body", [{}, {"id": ""}, {"id": "a b"}, {"id": 3}, {"id": "a", "x": 1}])
def test_get_or_create_with_a_bad_body_is_400(connection, alice, body):
    assert_error(get_or_create(connection, alice, body), 400, "InvalidPayload")
    assert not Conversation.objects.exists()


def test_get_or_create_is_not_shadowed_by_a_conversation_path(connection, alice):
    # `conversations/get-or-create` is its own route, not a conversation's id.
    response = as_user(connection, alice).get(url(connection, "conversations/get-or-create"))
    assert_error(response, 405, "MethodNotFound")


# --- DELETE /conversations/{id} ---------------------------------------------


def test_owner_deletes_a_conversation(connection, alice, bob):
    conversation = conversation_of(alice, "to/delete", bob)
    MessageFactory(conversation=conversation, user=bob)
    response = as_user(connection, alice).delete(url(connection, "conversations/to/delete"))
    assert response.status_code == 200, response.content
    assert response.json() == {}
    assert not Conversation.objects.exists()
    assert not Message.objects.exists()
    assert not Participant.objects.exists()
    assert User.objects.count() == 2
    response = as_user(connection, alice).get(url(connection, "conversations/to/delete"))
    assert_error(response, 404, "ResourceNotFound")


def test_a_participant_who_is_not_the_owner_cannot_delete(connection, alice, bob):
    conversation_of(alice, "kept", bob)
    response = as_user(connection, bob).delete(url(connection, "conversations/kept"))
    assert "owner" in assert_error(response, 403, "Forbidden")["message"]
    assert Conversation.objects.filter(chat_id="kept").exists()


def test_a_non_participant_cannot_delete(connection, alice, bob):
    conversation_of(alice, "kept")
    response = as_user(connection, bob).delete(url(connection, "conversations/kept"))
    assert_error(response, 403, "Forbidden")
    assert Conversation.objects.filter(chat_id="kept").exists()


def test_delete_unknown_conversation_is_404(connection, alice):
    response = as_user(connection, alice).delete(url(connection, "conversations/ghost"))
    assert_error(response, 404, "ResourceNotFound")


def test_an_ownerless_conversation_cannot_be_deleted(connection, alice, bob):
    conversation = conversation_of(alice, "orphan", bob)
    Conversation.objects.filter(pk=conversation.pk).update(owner=None)
    response = as_user(connection, bob).delete(url(connection, "conversations/orphan"))
    assert_error(response, 403, "Forbidden")


def test_other_methods_on_a_conversation_are_405(connection, alice):
    conversation_of(alice, "c")
    response = as_user(connection, alice).put(url(connection, "conversations/c"), {})
    assert_error(response, 405, "MethodNotFound")
