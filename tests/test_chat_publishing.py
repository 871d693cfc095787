"""What the chat interface's changes tell a conversation's live listeners:
each message on the bus once the request's transaction commits, in chat ids,
and nothing for a change that fails or is rolled back."""

import json
from typing import Any

import pytest
from django.db import transaction
from rest_framework.test import APIClient

from bots.models import Conversation, User
from chat.live.bus import conversation_channel
from chat.models import ChatConnection
from chat.services.messages import chat_message_create
from tests.conftest import assert_error
from tests.factories import (
    ChatConnectionFactory,
    ConversationFactory,
    MessageFactory,
    ParticipantFactory,
    UserFactory,
    user_key,
)

pytestmark = pytest.mark.django_db


class RecordingBus:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def publish(self, channel: str, message: str) -> None:
        self.sent.append((channel, json.loads(message)))


@pytest.fixture
def bus(monkeypatch) -> RecordingBus:
    """The bus stream_publish sends to once a transaction commits."""
    recording = RecordingBus()
    monkeypatch.setattr("chat.live.publish.live_bus", lambda: recording)
    return recording


@pytest.fixture
def connection(bot) -> ChatConnection:
    return ChatConnectionFactory(bot=bot)


@pytest.fixture
def alice(bot) -> User:
    return UserFactory(bot=bot, chat_id="alice")


@pytest.fixture
def bob(bot) -> User:
    return UserFactory(bot=bot, chat_id="bob")


@pytest.fixture
def conversation(alice, bob) -> Conversation:
    """`room/1`, owned by alice, with bob taking part."""
    conversation = ConversationFactory(bot=alice.bot, chat_id="room/1", owner=alice)
    ParticipantFactory(conversation=conversation, user=alice)
    ParticipantFactory(conversation=conversation, user=bob)
    return conversation


def as_user(connection: ChatConnection, user: User) -> APIClient:
    return APIClient(HTTP_X_USER_KEY=user_key(connection, user))


def url(connection: ChatConnection, path: str) -> str:
    return f"/chat/{connection.webhook_id}/{path}"


@pytest.fixture
def committed(django_capture_on_commit_callbacks, bus):
    """Run a request, check the bus heard nothing before the commit, then
    commit (run the on-commit callbacks) and answer the response."""

    def run(call: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            response = call()
            assert bus.sent == []
        return response

    return run


def test_a_users_message(connection, alice, conversation, bus, committed):
    response = committed(
        lambda: as_user(connection, alice).post(
            url(connection, "messages"),
            {"payload": {"type": "text", "text": "hi"}, "conversationId": "room/1"},
            format="json",
        )
    )
    assert response.status_code == 201, response.content
    message = response.json()["message"]
    assert bus.sent == [
        (
            conversation_channel(conversation.id),
            {"type": "message_created", "data": {**message, "isBot": False}},
        )
    ]
    assert message["conversationId"] == "room/1" and message["userId"] == "alice"


def test_a_deleted_message(connection, alice, conversation, bus, committed):
    message = MessageFactory(conversation=conversation, user=alice)
    response = committed(
        lambda: as_user(connection, alice).delete(url(connection, f"messages/{message.id}"))
    )
    assert response.status_code == 200, response.content
    assert bus.sent == [
        (
            conversation_channel(conversation.id),
            {
                "type": "message_deleted",
                "data": {"id": message.id, "conversationId": "room/1", "userId": "alice"},
            },
        )
    ]


def test_an_added_participant_once(connection, alice, conversation, bus, committed, bot):
    UserFactory(bot=bot, chat_id="carol")

    def add() -> Any:
        return as_user(connection, alice).post(
            url(connection, "conversations/room/1/participants"), {"userId": "carol"}, format="json"
        )

    assert committed(add).status_code == 201
    [(channel, said)] = bus.sent
    assert channel == conversation_channel(conversation.id)
    # participantId for @botpress/chat, participant for the official webchat.
    assert said["type"] == "participant_added"
    assert said["data"] == {
        "conversationId": "room/1",
        "participantId": "carol",
        "participant": {"id": "carol", **timestamps(said["data"]["participant"])},
    }
    bus.sent.clear()
    # Adding someone already there changes nothing, so nothing is said.
    assert committed(add).status_code == 200
    assert bus.sent == []


def test_a_removed_participant(connection, alice, conversation, bus, committed):
    response = committed(
        lambda: as_user(connection, alice).delete(
            url(connection, "conversations/room/1/participants/bob")
        )
    )
    assert response.status_code == 200, response.content
    assert bus.sent == [
        (
            conversation_channel(conversation.id),
            {
                "type": "participant_removed",
                "data": {"conversationId": "room/1", "participantId": "bob"},
            },
        )
    ]


def test_a_deleted_conversation_removes_every_participant(
    connection, alice, conversation, bus, committed
):
    channel = conversation_channel(conversation.id)
    response = committed(
        lambda: as_user(connection, alice).delete(url(connection, "conversations/room/1"))
    )
    assert response.status_code == 200, response.content
    assert sorted(bus.sent, key=lambda sent: sent[1]["data"]["participantId"]) == [
        (
            channel,
            {
                "type": "participant_removed",
                "data": {"conversationId": "room/1", "participantId": who},
            },
        )
        for who in ("alice", "bob")
    ]


def test_a_deleted_user_leaves_each_conversation(
    connection, alice, bob, conversation, bus, committed
):
    other = ConversationFactory(bot=bob.bot, chat_id="other", owner=bob)
    ParticipantFactory(conversation=other, user=bob)
    ConversationFactory(bot=bob.bot, chat_id="not-bobs")
    response = committed(lambda: as_user(connection, bob).delete(url(connection, "users/me")))
    assert response.status_code == 200, response.content
    heard = {channel: message for channel, message in bus.sent}
    assert len(bus.sent) == len(heard) == 2
    assert heard == {
        conversation_channel(conversation.id): {
            "type": "participant_removed",
            "data": {"conversationId": "room/1", "participantId": "bob"},
        },
        conversation_channel(other.id): {
            "type": "participant_removed",
            "data": {"conversationId": "other", "participantId": "bob"},
        },
    }


def test_a_custom_event(connection, alice, conversation, bus, committed):
    response = committed(
        lambda: as_user(connection, alice).post(
            url(connection, "events"),
            {"payload": {"clicked": "help"}, "conversationId": "room/1"},
            format="json",
        )
    )
    assert response.status_code == 201, response.content
    event = response.json()["event"]
    assert bus.sent == [
        (
            conversation_channel(conversation.id),
            {"type": "event_created", "data": {**event, "isBot": False}},
        )
    ]


# --- nothing for what fails -------------------------------------------------


def test_nothing_for_a_refused_message(connection, conversation, bus, committed, bot):
    outsider = UserFactory(bot=bot, chat_id="outsider")
    response = committed(
        lambda: as_user(connection, outsider).post(
            url(connection, "messages"),
            {"payload": {"type": "text", "text": "hi"}, "conversationId": "room/1"},
            format="json",
        )
    )
    assert_error(response, 403, "Forbidden")
    assert bus.sent == []


def test_nothing_for_a_refused_removal(connection, bob, conversation, bus, committed):
    response = committed(
        lambda: as_user(connection, bob).delete(
            url(connection, "conversations/room/1/participants/alice")
        )
    )
    assert_error(response, 403, "Forbidden")
    assert bus.sent == []


def test_nothing_for_a_message_whose_transaction_rolls_back(
    alice, conversation, bus, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        with pytest.raises(RuntimeError), transaction.atomic():
            chat_message_create(
                user=alice, conversation_chat_id="room/1", payload={"type": "text", "text": "x"}
            )
            raise RuntimeError("the surrounding work failed")
    assert bus.sent == []


def timestamps(user: dict[str, Any]) -> dict[str, str]:
    """A user's createdAt and updatedAt, checked to be the API's timestamps."""
    stamps = {name: user[name] for name in ("createdAt", "updatedAt")}
    assert all(stamp.endswith("Z") and len(stamp) == 24 for stamp in stamps.values()), stamps
    return stamps
