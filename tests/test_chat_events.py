"""Custom events through the chat interface: POST /events makes an event for
the bot, which the event engine delivers; GET /events/{id} reads one back."""

import re
from typing import Any

import pytest
from rest_framework.test import APIClient
from standardwebhooks.webhooks import Webhook

from bots.models import Conversation, User
from chat.models import ChatConnection
from events.models import Event, EventStatus
from tests.conftest import assert_error
from tests.delivering import deliver_due
from tests.factories import (
    BotFactory,
    ChatConnectionFactory,
    ConversationFactory,
    EventFactory,
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
def alice(bot) -> User:
    return UserFactory(bot=bot, chat_id="alice")


@pytest.fixture
def stranger(bot) -> User:
    return UserFactory(bot=bot, chat_id="stranger")


@pytest.fixture
def conversation(alice) -> Conversation:
    conversation = ConversationFactory(bot=alice.bot, chat_id="room/7", owner=alice)
    ParticipantFactory(conversation=conversation, user=alice)
    return conversation


def as_user(connection: ChatConnection, user: User) -> APIClient:
    return APIClient(HTTP_X_USER_KEY=user_key(connection, user))


def events_url(connection: ChatConnection, event_id: str = "") -> str:
    return f"/chat/{connection.webhook_id}/events" + (f"/{event_id}" if event_id else "")


def send(connection: ChatConnection, user: User, body: Any) -> Any:
    return as_user(connection, user).post(events_url(connection), body, format="json")


PAYLOAD = {"action": "opened-widget", "page": {"url": "https://example.com", "n": [1, 2]}}


# --- POST /events -----------------------------------------------------------


def test_create_an_event(connection, alice, conversation):
    response = send(connection, alice, {"payload": PAYLOAD, "conversationId": "room/7"})
    assert response.status_code == 201, response.content
    event = response.json()["event"]
    assert set(event) == {"id", "createdAt", "payload", "conversationId", "userId"}
    assert event["id"].startswith("evt_")
    assert TIMESTAMP.match(event["createdAt"])
    assert (event["payload"], event["conversationId"], event["userId"]) == (
        PAYLOAD,
        "room/7",
        "alice",
    )
    row = Event.objects.get(id=event["id"])
    assert row.bot_id == alice.bot_id
    assert row.type == "custom"
    assert row.payload == PAYLOAD
    # Runtime references, as every event of the bot has them.
    assert (row.conversation_id, row.user_id, row.message_id) == (
        conversation.id,
        alice.id,
        None,
    )
    assert row.status == EventStatus.PENDING


def test_the_event_engine_delivers_it_signed(connection, alice, conversation, hooked, receiver):
    event_id = send(connection, alice, {"payload": PAYLOAD, "conversationId": "room/7"}).json()[
        "event"
    ]["id"]
    assert deliver_due() == {"processed": 1}
    [received] = receiver.requests
    Webhook(hooked.signing_secret).verify(received.body, received.headers)
    body = received.json()
    assert body["type"] == "custom"
    assert body["payload"] == PAYLOAD
    assert (body["conversationId"], body["userId"]) == (conversation.id, alice.id)
    assert Event.objects.get(id=event_id).status == EventStatus.PROCESSED


def test_an_empty_payload_is_an_event_too(connection, alice, conversation):
    response = send(connection, alice, {"payload": {}, "conversationId": "room/7"})
    assert response.status_code == 201, response.content


def test_a_non_participant_cannot_send_an_event(connection, conversation, stranger):
    response = send(connection, stranger, {"payload": {}, "conversationId": "room/7"})
    assert_error(response, 403, "Forbidden")
    assert not Event.objects.exists()


def test_an_event_in_an_unknown_conversation_is_reference_not_found(connection, alice):
    response = send(connection, alice, {"payload": {}, "conversationId": "nowhere"})
    assert "conversationId" in assert_error(response, 400, "ReferenceNotFound")["message"]
    assert not Event.objects.exists()


def test_an_event_in_a_conversation_of_another_bot_is_reference_not_found(connection, alice):
    other = UserFactory(bot=BotFactory(), chat_id="alice")
    theirs = ConversationFactory(bot=other.bot, chat_id="theirs", owner=other)
    ParticipantFactory(conversation=theirs, user=other)
    response = send(connection, alice, {"payload": {}, "conversationId": "theirs"})
    assert_error(response, 400, "ReferenceNotFound")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"conversationId": "room/7"}, "payload"),
        ({"payload": "text", "conversationId": "room/7"}, "payload"),
        ({"payload": [1], "conversationId": "room/7"}, "payload"),
        ({"payload": None, "conversationId": "room/7"}, "payload"),
        ({"payload": {}}, "conversationId"),
        ({"payload": {}, "conversationId": 7}, "conversationId"),
        ({"payload": {}, "conversationId": ""}, "conversationId"),
        ({"payload": {}, "conversationId": "x" * 71}, "conversationId"),
        ({"payload": {}, "conversationId": "room/7", "type": "x"}, "type"),
    ],
)
def test_a_bad_body_is_400(connection, alice, conversation, body, field):
    response = send(connection, alice, body)
    assert assert_error(response, 400, "InvalidPayload")["message"].startswith(f"{field}:")
    assert not Event.objects.exists()


def test_without_a_key_is_401(api_client, connection, conversation):
    response = api_client.post(
        events_url(connection), {"payload": {}, "conversationId": "room/7"}, format="json"
    )
    assert_error(response, 401, "Unauthorized")
    assert not Event.objects.exists()


# --- GET /events/{id} -------------------------------------------------------


def test_get_an_event(connection, alice, conversation):
    created = send(connection, alice, {"payload": PAYLOAD, "conversationId": "room/7"}).json()
    response = as_user(connection, alice).get(events_url(connection, created["event"]["id"]))
    assert response.status_code == 200, response.content
    assert response.json() == created


def test_another_participant_gets_the_event(connection, alice, conversation, bot):
    bob = UserFactory(bot=bot, chat_id="bob")
    ParticipantFactory(conversation=conversation, user=bob)
    event_id = send(connection, alice, {"payload": {}, "conversationId": "room/7"}).json()["event"][
        "id"
    ]
    response = as_user(connection, bob).get(events_url(connection, event_id))
    assert response.status_code == 200, response.content
    assert response.json()["event"]["userId"] == "alice"


def test_get_an_event_as_a_non_participant_is_403(connection, alice, conversation, stranger):
    event_id = send(connection, alice, {"payload": {}, "conversationId": "room/7"}).json()["event"][
        "id"
    ]
    response = as_user(connection, stranger).get(events_url(connection, event_id))
    assert "room/7" not in assert_error(response, 403, "Forbidden")["message"]


def test_get_an_unknown_event_is_404(connection, alice):
    response = as_user(connection, alice).get(
        events_url(connection, "evt_01J00000000000000000000000")
    )
    assert_error(response, 404, "ResourceNotFound")


def test_the_bots_other_events_are_not_shown(connection, alice, conversation):
    # message_created carries runtime ids: not the chat interface's to show.
    message_event = EventFactory(
        bot=alice.bot, type="message_created", conversation=conversation, user=alice
    )
    without_user = EventFactory(bot=alice.bot, type="custom", conversation=conversation)
    client = as_user(connection, alice)
    for event in (message_event, without_user):
        assert_error(client.get(events_url(connection, event.id)), 404, "ResourceNotFound")


def test_an_event_of_another_bot_is_404(connection, alice):
    other_user = UserFactory(bot=BotFactory(), chat_id="alice")
    other_conversation = ConversationFactory(bot=other_user.bot, owner=other_user)
    event = EventFactory(
        bot=other_user.bot, type="custom", conversation=other_conversation, user=other_user
    )
    response = as_user(connection, alice).get(events_url(connection, event.id))
    assert_error(response, 404, "ResourceNotFound")


@pytest.mark.parametrize("event_id", ["nope", "msg_01J00000000000000000000000", "evt_short"])
def test_get_an_event_by_an_impossible_id_is_400(connection, alice, event_id):
    response = as_user(connection, alice).get(events_url(connection, event_id))
    assert_error(response, 400, "InvalidIdentifier")
