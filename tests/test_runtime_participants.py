"""/v1/chat/conversations/{id}/participants[/{userId}]: the bot adds any user
of its own to any of its conversations and removes anyone; answers are users
in their runtime shape; what listeners hear; what the chat interface's
owner-only rules make of a removed owner."""

from typing import Any

import pytest
from rest_framework.test import APIClient

from bots.models import Bot, Conversation, Participant, User
from chat.live.bus import conversation_channel
from chat.models import ChatConnection
from tests.conftest import assert_error
from tests.factories import (
    BotFactory,
    ChatConnectionFactory,
    ConversationFactory,
    ParticipantFactory,
    UserFactory,
    user_key,
)
from tests.test_chat_publishing import RecordingBus, bus, committed  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(bot: Bot) -> User:
    return UserFactory(bot=bot, chat_id="alice", name="Alice", tags={"crm": "1"})


@pytest.fixture
def bob(bot: Bot) -> User:
    return UserFactory(bot=bot, chat_id="bob")


@pytest.fixture
def room(bot: Bot, alice: User) -> Conversation:
    """A conversation alice made in the chat interface: she owns it and takes part."""
    conversation = ConversationFactory(bot=bot, chat_id="room", owner=alice)
    ParticipantFactory(conversation=conversation, user=alice)
    return conversation


@pytest.fixture
def connection(bot: Bot) -> ChatConnection:
    return ChatConnectionFactory(bot=bot)


def participants_url(conversation: Conversation, user: User | None = None) -> str:
    url = f"/v1/chat/conversations/{conversation.id}/participants"
    return url if user is None else f"{url}/{user.id}"


def add(client: Any, conversation: Conversation, user_id: str) -> Any:
    return client.post(participants_url(conversation), {"userId": user_id}, format="json")


def participant(response: Any, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"participant"}
    return body["participant"]


def as_chat_user(connection: ChatConnection, user: User) -> APIClient:
    return APIClient(HTTP_X_USER_KEY=user_key(connection, user))


# --- add ------------------------------------------------------------------------------------


def test_add_answers_the_user_in_its_runtime_shape(runtime_client, room, bob, bus, committed):  # noqa: F811
    added = participant(committed(lambda: add(runtime_client(), room, bob.id)), 201)
    assert added == runtime_client().get(f"/v1/chat/users/{bob.id}").json()["user"]
    assert Participant.objects.filter(conversation=room, user=bob).exists()
    [(channel, said)] = bus.sent
    assert channel == conversation_channel(room.id)
    assert said["type"] == "participant_added"
    assert said["data"]["participant"]["id"] == "bob"
    assert {**said["data"], "participant": None} == {
        "conversationId": "room",
        "participantId": "bob",
        "participant": None,
    }


def test_adding_someone_already_there_changes_nothing(runtime_client, room, alice, bus, committed):  # noqa: F811
    again = participant(committed(lambda: add(runtime_client(), room, alice.id)), 200)
    assert again["id"] == alice.id and again["name"] == "Alice"
    assert Participant.objects.filter(conversation=room).count() == 1
    assert bus.sent == []


def test_the_bot_adds_to_a_conversation_it_made_which_then_serves_the_chat(
    runtime_client, bot, alice, connection
):
    made = runtime_client().post("/v1/chat/conversations", {"channel": "channel"}, format="json")
    conversation = Conversation.objects.get(id=made.json()["conversation"]["id"])
    # Nobody takes part in a conversation the bot made, until it adds them.
    listed = runtime_client().get(participants_url(conversation)).json()
    assert listed == {"participants": [], "meta": {}}
    chat = as_chat_user(connection, alice)
    base = f"/chat/{connection.webhook_id}"
    assert_error(chat.get(f"{base}/conversations/{conversation.id}"), 403, "Forbidden")

    participant(add(runtime_client(), conversation, alice.id), 201)

    assert chat.get(f"{base}/conversations/{conversation.id}").status_code == 200
    sent = chat.post(
        f"{base}/messages",
        {"conversationId": conversation.id, "payload": {"type": "text", "text": "hi"}},
        format="json",
    )
    assert sent.status_code == 201, sent.content
    # It has no owner: in the chat interface, nobody adds, removes or deletes there.
    assert_error(
        chat.post(
            f"{base}/conversations/{conversation.id}/participants",
            {"userId": "alice"},
            format="json",
        ),
        403,
        "Forbidden",
    )


@pytest.mark.parametrize(
    ("user_id", "status", "error_type"),
    [
        ("user_01J0000000000000000000ZZZZ", 400, "ReferenceNotFound"),
        ("conv_01J0000000000000000000ZZZZ", 400, "ReferenceNotFound"),
        ("bob", 400, "InvalidPayload"),
        (5, 400, "InvalidPayload"),
    ],
)
def test_add_a_user_that_is_not_the_bots(runtime_client, room, user_id, status, error_type):
    body = assert_error(add(runtime_client(), room, user_id), status, error_type)
    assert "userId" in body["message"]
    assert Participant.objects.count() == 1


def test_add_a_user_of_another_bot(runtime_client, bot, room):
    theirs = UserFactory(bot=BotFactory(workspace=bot.workspace))
    assert_error(add(runtime_client(), room, theirs.id), 400, "ReferenceNotFound")


@pytest.mark.parametrize("body", [{}, {"userId": None}, {"userId": "x", "role": "admin"}])
def test_add_refuses_a_bad_body(runtime_client, room, body):
    response = runtime_client().post(participants_url(room), body, format="json")
    assert_error(response, 400, "InvalidPayload")


# --- read -----------------------------------------------------------------------------------


def test_list_in_the_order_they_joined_paged(runtime_client, room, alice, bob):
    carol = UserFactory(bot=room.bot, chat_id="carol")
    for user in (bob, carol):
        ParticipantFactory(conversation=room, user=user)
    client = runtime_client()
    first = client.get(participants_url(room), {"pageSize": 2}).json()
    assert [user["id"] for user in first["participants"]] == [alice.id, bob.id]
    assert first["participants"][0] == client.get(f"/v1/chat/users/{alice.id}").json()["user"]
    rest = client.get(
        participants_url(room), {"pageSize": 2, "nextToken": first["meta"]["nextToken"]}
    ).json()
    assert rest == {
        "participants": [client.get(f"/v1/chat/users/{carol.id}").json()["user"]],
        "meta": {},
    }


def test_get_a_participant(runtime_client, room, alice, bob):
    got = participant(runtime_client().get(participants_url(room, alice)))
    assert (got["id"], got["name"], got["tags"]) == (alice.id, "Alice", {"crm": "1"})
    # A user of the bot who does not take part.
    body = assert_error(runtime_client().get(participants_url(room, bob)), 404, "ResourceNotFound")
    assert bob.id in body["message"] and room.id in body["message"]


@pytest.mark.parametrize("role", ["viewer", "developer"])
def test_readers_read(runtime_client, room, alice, role):
    assert runtime_client(role).get(participants_url(room)).status_code == 200
    assert runtime_client(role).get(participants_url(room, alice)).status_code == 200


# --- remove ---------------------------------------------------------------------------------


def test_remove_a_participant(runtime_client, room, bob, bus, committed):  # noqa: F811
    ParticipantFactory(conversation=room, user=bob)
    response = committed(lambda: runtime_client().delete(participants_url(room, bob)))
    assert (response.status_code, response.json()) == (200, {})
    assert not Participant.objects.filter(user=bob).exists()
    assert bus.sent == [
        (
            conversation_channel(room.id),
            {
                "type": "participant_removed",
                "data": {"conversationId": "room", "participantId": "bob"},
            },
        )
    ]
    assert_error(runtime_client().delete(participants_url(room, bob)), 404, "ResourceNotFound")


def test_the_bot_removes_the_owner_who_owns_it_no_more(
    runtime_client, room, alice, bob, connection
):
    """The chat interface refuses to remove an owner; the bot may, and the
    conversation is then owned by nobody, as when the owner's user is
    deleted: added back, alice is a participant like any other."""
    ParticipantFactory(conversation=room, user=bob)
    response = runtime_client().delete(participants_url(room, alice))
    assert response.status_code == 200, response.content
    room.refresh_from_db()
    assert room.owner is None

    participant(add(runtime_client(), room, alice.id), 201)
    chat = as_chat_user(connection, alice)
    base = f"/chat/{connection.webhook_id}/conversations/room"
    assert_error(chat.delete(f"{base}/participants/bob"), 403, "Forbidden")
    assert_error(chat.delete(base), 403, "Forbidden")
    assert Participant.objects.filter(conversation=room).count() == 2


# --- ids, tenants, roles, cost ----------------------------------------------------------------


def test_a_conversation_of_another_bot(runtime_client, bot, alice):
    theirs = ConversationFactory(bot=BotFactory(workspace=bot.workspace))
    client = runtime_client()
    assert_error(client.get(participants_url(theirs)), 404, "ResourceNotFound")
    assert_error(add(client, theirs, alice.id), 404, "ResourceNotFound")
    assert_error(client.get(participants_url(theirs, alice)), 404, "ResourceNotFound")
    assert_error(client.delete(participants_url(theirs, alice)), 404, "ResourceNotFound")
    assert not Participant.objects.exists()


@pytest.mark.parametrize("method", ["get", "delete"])
def test_malformed_ids(runtime_client, room, alice, method):
    send = getattr(runtime_client(), method)
    for path in (
        f"/v1/chat/conversations/room/participants/{alice.id}",
        f"/v1/chat/conversations/{room.id}/participants/alice",
    ):
        assert_error(send(path), 400, "InvalidIdentifier")


@pytest.mark.parametrize("role", ["viewer", "billing"])
def test_viewer_and_billing_may_not_add_or_remove(runtime_client, room, alice, bob, role):
    client = runtime_client(role)
    assert_error(add(client, room, bob.id), 403, "Forbidden")
    assert_error(client.delete(participants_url(room, alice)), 403, "Forbidden")
    assert Participant.objects.filter(conversation=room).count() == 1


def test_query_count_of_an_add(runtime_client, room, bob, django_assert_max_num_queries):
    client = runtime_client()
    participant(add(client, room, UserFactory(bot=room.bot).id), 201)
    # the conversation; savepoint; the user; the participation (its savepoint,
    # lookup and insert); release
    with django_assert_max_num_queries(8):
        participant(add(client, room, bob.id), 201)
