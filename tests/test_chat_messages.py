"""The chat interface: hello, CORS, user keys, POST /chat/{webhookId}/messages
with every payload type, and reading, listing and deleting messages."""

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import pytest
from rest_framework.test import APIClient

from bots.models import Bot, Conversation, Message, User
from chat.models import ChatConnection
from events.models import Event
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


@dataclass
class Chat:
    bot: Bot
    connection: ChatConnection
    user: User
    key: str
    conversation: Conversation

    @property
    def messages_url(self) -> str:
        return f"/chat/{self.connection.webhook_id}/messages"

    def post(self, body: Any, key: str | None = None, **extra: Any):
        client = APIClient()
        return client.post(
            self.messages_url, body, format="json", HTTP_X_USER_KEY=key or self.key, **extra
        )

    def send(self, payload: Any, headers: dict[str, str] | None = None, **fields: Any):
        body = {"payload": payload, "conversationId": self.conversation.chat_id, **fields}
        return self.post(body, **(headers or {}))


@pytest.fixture
def chat(bot) -> Chat:
    """A connection of `bot`, a user with a chosen chat id, and a conversation
    (also with a chosen chat id) that the user takes part in."""
    connection = ChatConnectionFactory(bot=bot)
    user = UserFactory(bot=bot, chat_id="alice", tags={"chat:id": "alice"})
    conversation = ConversationFactory(bot=bot, chat_id="support-1", owner=user)
    ParticipantFactory(conversation=conversation, user=user)
    return Chat(bot, connection, user, user_key(connection, user), conversation)


def counts():
    return Message.objects.count(), Event.objects.count()


def assert_invalid_payload(response, *paths: str) -> dict[str, Any]:
    """A 400 InvalidPayload whose message names each of `paths`; an index may
    be written `items[0]` or `items.0`."""
    body = assert_error(response, 400, "InvalidPayload")
    for path in paths:
        dotted = re.sub(r"\[(\d+)\]", r".\1", path)
        assert path in body["message"] or dotted in body["message"], body["message"]
    return body


# --- hello and unknown webhook ids -----------------------------------------


def test_hello_without_key(api_client, chat):
    response = api_client.get(f"/chat/{chat.connection.webhook_id}/hello")
    assert response.status_code == 200, response.content


def test_hello_of_unknown_webhook_is_404(api_client, chat):
    assert_error(api_client.get(f"/chat/{uuid.uuid4()}/hello"), 404, "ResourceNotFound")


def test_messages_of_unknown_webhook_is_404_without_key(api_client, chat):
    response = api_client.post(
        f"/chat/{uuid.uuid4()}/messages",
        {"payload": {"type": "text", "text": "hi"}, "conversationId": "support-1"},
        format="json",
    )
    assert_error(response, 404, "ResourceNotFound")


def test_messages_of_unknown_webhook_is_404_with_key(api_client, chat):
    response = api_client.post(
        f"/chat/{uuid.uuid4()}/messages",
        {"payload": {"type": "text", "text": "hi"}, "conversationId": "support-1"},
        format="json",
        HTTP_X_USER_KEY=chat.key,
    )
    assert_error(response, 404, "ResourceNotFound")
    assert counts() == (0, 0)


# --- CORS -------------------------------------------------------------------


def test_cors_preflight_of_messages(api_client, chat):
    origin = "https://webchat.example.com"
    response = api_client.options(
        chat.messages_url,
        HTTP_ORIGIN=origin,
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="x-user-key,content-type",
    )
    assert response.status_code in (200, 204), response.content
    assert response.headers["Access-Control-Allow-Origin"] in ("*", origin)
    allowed_headers = {
        h.strip().lower() for h in response.headers["Access-Control-Allow-Headers"].split(",")
    }
    assert {"x-user-key", "content-type"} <= allowed_headers
    allowed_methods = {
        m.strip().upper() for m in response.headers["Access-Control-Allow-Methods"].split(",")
    }
    assert "POST" in allowed_methods


def test_cors_on_the_actual_request(chat):
    origin = "https://webchat.example.com"
    response = chat.send({"type": "text", "text": "hi"}, headers={"HTTP_ORIGIN": origin})
    assert response.status_code == 201, response.content
    assert response.headers["Access-Control-Allow-Origin"] in ("*", origin)


def test_cors_on_an_error_response(api_client, chat):
    # A browser can read an error only when it carries the CORS headers too.
    origin = "https://webchat.example.com"
    response = api_client.post(
        chat.messages_url,
        {"payload": {"type": "text", "text": "hi"}, "conversationId": "support-1"},
        format="json",
        HTTP_ORIGIN=origin,
    )
    assert_error(response, 401, "Unauthorized")
    assert response.headers["Access-Control-Allow-Origin"] in ("*", origin)


def test_cors_on_a_too_large_body(api_client, chat):
    origin = "https://webchat.example.com"
    response = api_client.post(
        chat.messages_url,
        data="x" * (1024 * 1024 + 1),
        content_type="application/json",
        HTTP_ORIGIN=origin,
        HTTP_X_USER_KEY=chat.key,
    )
    assert_error(response, 413, "PayloadTooLarge")
    assert response.headers.get("Access-Control-Allow-Origin") in ("*", origin)


def test_cors_preflight_of_hello(api_client, chat):
    response = api_client.options(
        f"/chat/{chat.connection.webhook_id}/hello",
        HTTP_ORIGIN="https://elsewhere.example",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="GET",
    )
    assert response.status_code in (200, 204)
    assert response.headers["Access-Control-Allow-Origin"] in ("*", "https://elsewhere.example")


# --- creating a message -----------------------------------------------------


def test_create_message(chat):
    payload = {"type": "text", "text": "Hello bot"}
    response = chat.send(payload)
    assert response.status_code == 201, response.content
    message = response.json()["message"]
    assert set(message) == {"id", "createdAt", "payload", "userId", "conversationId"}
    assert message["payload"] == payload
    assert message["userId"] == "alice"
    assert message["conversationId"] == "support-1"
    assert message["id"].startswith("msg_") and len(message["id"]) == 30
    assert TIMESTAMP.match(message["createdAt"])

    row = Message.objects.get(id=message["id"])
    assert row.bot_id == chat.bot.id
    assert row.user_id == chat.user.id
    assert row.conversation_id == chat.conversation.id
    assert row.payload == payload
    assert row.type == "text"
    assert row.is_bot is False


def test_create_message_with_metadata(chat):
    metadata = {"source": "widget", "nested": {"a": [1, 2]}}
    response = chat.send({"type": "text", "text": "hi"}, metadata=metadata)
    assert response.status_code == 201, response.content
    message = response.json()["message"]
    assert message["metadata"] == metadata
    assert Message.objects.get(id=message["id"]).metadata == metadata


def test_message_created_event(chat):
    response = chat.send({"type": "text", "text": "Hello bot"})
    assert response.status_code == 201, response.content
    message_id = response.json()["message"]["id"]

    event = Event.objects.get(bot=chat.bot)
    assert event.type == "message_created"
    assert event.conversation_id == chat.conversation.id
    assert event.user_id == chat.user.id
    assert event.message_id == message_id
    assert event.status in ("pending", "ignored")
    payload = event.payload
    assert {"message", "conversation", "user"} <= set(payload)
    # Event payloads carry runtime ids, never chat ids.
    assert payload["message"]["id"] == message_id
    assert payload["message"]["conversationId"] == chat.conversation.id
    assert payload["message"]["userId"] == chat.user.id
    assert payload["message"]["payload"] == {"type": "text", "text": "Hello bot"}
    assert payload["conversation"]["id"] == chat.conversation.id
    assert payload["user"]["id"] == chat.user.id


def test_one_event_per_message_and_none_for_other_bots(chat):
    other_bot = BotFactory(workspace=chat.bot.workspace)
    for text in ("one", "two"):
        assert chat.send({"type": "text", "text": text}).status_code == 201
    assert Event.objects.filter(bot=chat.bot, type="message_created").count() == 2
    assert not Event.objects.filter(bot=other_bot).exists()


def test_participant_who_is_not_the_owner_may_post(chat):
    bob = UserFactory(bot=chat.bot, chat_id="bob")
    ParticipantFactory(conversation=chat.conversation, user=bob)
    response = chat.post(
        {"payload": {"type": "text", "text": "hi"}, "conversationId": "support-1"},
        key=user_key(chat.connection, bob),
    )
    assert response.status_code == 201, response.content
    assert response.json()["message"]["userId"] == "bob"


def test_default_chat_ids_are_the_runtime_ids(bot):
    connection = ChatConnectionFactory(bot=bot)
    user = UserFactory(bot=bot)
    conversation = ConversationFactory(bot=bot, owner=user)
    ParticipantFactory(conversation=conversation, user=user)
    response = APIClient().post(
        f"/chat/{connection.webhook_id}/messages",
        {"payload": {"type": "text", "text": "hi"}, "conversationId": conversation.id},
        format="json",
        HTTP_X_USER_KEY=user_key(connection, user),
    )
    assert response.status_code == 201, response.content
    assert response.json()["message"]["userId"] == user.id
    assert response.json()["message"]["conversationId"] == conversation.id


# --- user keys --------------------------------------------------------------


def assert_unauthorized(response):
    assert_error(response, 401, "Unauthorized")
    assert response.headers["WWW-Authenticate"]
    assert counts() == (0, 0)


def test_missing_key_is_401(api_client, chat):
    response = api_client.post(
        chat.messages_url,
        {"payload": {"type": "text", "text": "hi"}, "conversationId": "support-1"},
        format="json",
    )
    assert_unauthorized(response)


@pytest.mark.parametrize("key", ["", "not-a-jwt", "a.b.c", "Bearer x", "e30.e30.e30"])
def test_malformed_key_is_401(chat, key):
    response = APIClient().post(
        chat.messages_url,
        {"payload": {"type": "text", "text": "hi"}, "conversationId": "support-1"},
        format="json",
        HTTP_X_USER_KEY=key,
    )
    assert_unauthorized(response)


def test_key_of_another_connection_is_401(chat):
    other = ChatConnectionFactory(bot=chat.bot)
    assert other.encryption_key != chat.connection.encryption_key
    response = chat.post(
        {"payload": {"type": "text", "text": "hi"}, "conversationId": "support-1"},
        key=user_key(other, chat.user),
    )
    assert_unauthorized(response)


def test_key_signed_with_another_secret_is_401(chat):
    forged = jwt.encode({"id": "alice"}, "another secret of 32 bytes or more!!", algorithm="HS256")
    response = chat.post(
        {"payload": {"type": "text", "text": "hi"}, "conversationId": "support-1"}, key=forged
    )
    assert_unauthorized(response)


def test_unsigned_key_is_401(chat):
    unsigned = jwt.encode({"id": "alice"}, None, algorithm="none")
    response = chat.post(
        {"payload": {"type": "text", "text": "hi"}, "conversationId": "support-1"}, key=unsigned
    )
    assert_unauthorized(response)


def test_key_naming_an_unknown_user_is_401(chat):
    key = jwt.encode({"id": "nobody"}, chat.connection.encryption_key, algorithm="HS256")
    response = chat.post(
        {"payload": {"type": "text", "text": "hi"}, "conversationId": "support-1"}, key=key
    )
    assert_unauthorized(response)


def test_key_naming_a_user_of_another_bot_is_401(chat):
    UserFactory(bot=BotFactory(), chat_id="mallory")
    key = jwt.encode({"id": "mallory"}, chat.connection.encryption_key, algorithm="HS256")
    response = chat.post(
        {"payload": {"type": "text", "text": "hi"}, "conversationId": "support-1"}, key=key
    )
    assert_unauthorized(response)


@pytest.mark.parametrize("claims", [{}, {"id": 5}, {"id": ""}, {"user": "alice"}])
def test_key_without_a_user_id_is_401(chat, claims):
    key = jwt.encode(claims, chat.connection.encryption_key, algorithm="HS256")
    response = chat.post(
        {"payload": {"type": "text", "text": "hi"}, "conversationId": "support-1"}, key=key
    )
    assert_unauthorized(response)


def test_expired_key_is_401(chat):
    expired = jwt.encode(
        {"id": "alice", "exp": datetime.now(UTC) - timedelta(minutes=5)},
        chat.connection.encryption_key,
        algorithm="HS256",
    )
    response = chat.post(
        {"payload": {"type": "text", "text": "hi"}, "conversationId": "support-1"}, key=expired
    )
    assert_unauthorized(response)


def test_key_with_future_expiry_is_accepted(chat):
    key = jwt.encode(
        {"id": "alice", "exp": datetime.now(UTC) + timedelta(hours=1)},
        chat.connection.encryption_key,
        algorithm="HS256",
    )
    response = chat.post(
        {"payload": {"type": "text", "text": "hi"}, "conversationId": "support-1"}, key=key
    )
    assert response.status_code == 201, response.content


def test_key_is_checked_before_the_body(chat):
    response = APIClient().post(
        chat.messages_url, {"nonsense": True}, format="json", HTTP_X_USER_KEY="not-a-jwt"
    )
    assert_unauthorized(response)


# --- conversations and participants -----------------------------------------


def test_non_participant_is_forbidden(chat):
    stranger = UserFactory(bot=chat.bot, chat_id="stranger")
    response = chat.post(
        {"payload": {"type": "text", "text": "hi"}, "conversationId": "support-1"},
        key=user_key(chat.connection, stranger),
    )
    assert_error(response, 403, "Forbidden")
    assert counts() == (0, 0)


def test_unknown_conversation_is_reference_not_found(chat):
    response = chat.post({"payload": {"type": "text", "text": "hi"}, "conversationId": "nope"})
    body = assert_error(response, 400, "ReferenceNotFound")
    assert "conversationId" in body["message"]
    assert counts() == (0, 0)


def test_conversation_of_another_bot_is_reference_not_found(chat):
    other_bot = BotFactory(workspace=chat.bot.workspace)
    other_user = UserFactory(bot=other_bot, chat_id="alice")
    ParticipantFactory(
        conversation=ConversationFactory(bot=other_bot, chat_id="elsewhere"), user=other_user
    )
    response = chat.post({"payload": {"type": "text", "text": "hi"}, "conversationId": "elsewhere"})
    assert_error(response, 400, "ReferenceNotFound")
    assert counts() == (0, 0)


def test_runtime_id_of_a_conversation_with_a_chat_id_is_not_its_chat_id(chat):
    response = chat.post(
        {"payload": {"type": "text", "text": "hi"}, "conversationId": chat.conversation.id}
    )
    assert_error(response, 400, "ReferenceNotFound")


# --- payloads ---------------------------------------------------------------

CARD = {
    "type": "card",
    "title": "A card",
    "subtitle": "Sub",
    "imageUrl": "https://example.com/a.png",
    "actions": [
        {"action": "postback", "label": "Yes", "value": "yes"},
        {"action": "url", "label": "Site", "value": "https://example.com"},
        {"action": "say", "label": "Hi", "value": "hi"},
    ],
}

VALID_PAYLOADS = {
    "text": {"type": "text", "text": "Hello"},
    "markdown": {"type": "markdown", "markdown": "**Hello**"},
    "image": {"type": "image", "imageUrl": "https://example.com/a.png"},
    "audio": {"type": "audio", "audioUrl": "https://example.com/a.mp3"},
    "video": {"type": "video", "videoUrl": "https://example.com/a.mp4"},
    "file": {"type": "file", "fileUrl": "https://example.com/a.pdf", "title": "A"},
    "location": {
        "type": "location",
        "latitude": 45.5,
        "longitude": -73.6,
        "address": "Somewhere",
        "title": "Office",
    },
    "card": CARD,
    "choice": {"type": "choice", "text": "Pick", "options": [{"label": "A", "value": "a"}]},
    "dropdown": {
        "type": "dropdown",
        "text": "Pick",
        "options": [{"label": "A", "value": "a"}, {"label": "B", "value": "b"}],
    },
    "carousel": {
        "type": "carousel",
        "items": [
            CARD,
            {"title": "No type", "actions": [{"action": "say", "label": "x", "value": "x"}]},
        ],
    },
    "bloc": {
        "type": "bloc",
        "items": [
            {"type": "text", "payload": {"text": "wrapped"}},
            {"type": "image", "imageUrl": "https://example.com/flat.png"},
        ],
    },
}

MINIMAL_PAYLOADS = {
    "file": {"type": "file", "fileUrl": "https://example.com/a.pdf"},
    "location": {"type": "location", "latitude": 0, "longitude": 0},
    "card": {"type": "card", "title": "T", "actions": []},
}

# (type, payload with a required field missing, path the message must name)
MISSING_FIELD = [
    ("text", {"type": "text"}, "payload.text"),
    ("markdown", {"type": "markdown"}, "payload.markdown"),
    ("image", {"type": "image"}, "payload.imageUrl"),
    ("audio", {"type": "audio"}, "payload.audioUrl"),
    ("video", {"type": "video"}, "payload.videoUrl"),
    ("file", {"type": "file", "title": "x"}, "payload.fileUrl"),
    ("location", {"type": "location", "latitude": 1}, "payload.longitude"),
    ("card", {"type": "card", "actions": []}, "payload.title"),
    ("card-actions", {"type": "card", "title": "T"}, "payload.actions"),
    (
        "card-action-value",
        {"type": "card", "title": "T", "actions": [{"action": "say", "label": "x"}]},
        "payload.actions[0].value",
    ),
    ("choice", {"type": "choice", "text": "Pick"}, "payload.options"),
    (
        "choice-option-label",
        {"type": "choice", "text": "Pick", "options": [{"value": "a"}]},
        "payload.options[0].label",
    ),
    ("dropdown", {"type": "dropdown", "options": []}, "payload.text"),
    ("carousel", {"type": "carousel"}, "payload.items"),
    (
        "carousel-item-title",
        {"type": "carousel", "items": [{"type": "card", "actions": []}]},
        "payload.items[0].title",
    ),
    ("bloc", {"type": "bloc"}, "payload.items"),
]

# (type, payload with a wrong type, path the message must name)
WRONG_TYPE = [
    ("text", {"type": "text", "text": 123}, "payload.text"),
    ("markdown", {"type": "markdown", "markdown": ["x"]}, "payload.markdown"),
    ("image", {"type": "image", "imageUrl": 1}, "payload.imageUrl"),
    ("audio", {"type": "audio", "audioUrl": True}, "payload.audioUrl"),
    ("video", {"type": "video", "videoUrl": {"u": "x"}}, "payload.videoUrl"),
    ("file", {"type": "file", "fileUrl": "https://x", "title": 5}, "payload.title"),
    ("location", {"type": "location", "latitude": "45", "longitude": 1}, "payload.latitude"),
    ("location-bool", {"type": "location", "latitude": 1, "longitude": True}, "payload.longitude"),
    ("card", {"type": "card", "title": 7, "actions": []}, "payload.title"),
    ("card-actions", {"type": "card", "title": "T", "actions": "none"}, "payload.actions"),
    (
        "card-action",
        {"type": "card", "title": "T", "actions": [{"action": "call", "label": "x", "value": "y"}]},
        "payload.actions[0].action",
    ),
    ("choice", {"type": "choice", "text": 1, "options": []}, "payload.text"),
    (
        "choice-option",
        {"type": "choice", "text": "Pick", "options": [{"label": 1, "value": "a"}]},
        "payload.options[0].label",
    ),
    (
        "dropdown",
        {"type": "dropdown", "text": "Pick", "options": {"label": "a", "value": "a"}},
        "payload.options",
    ),
    ("carousel", {"type": "carousel", "items": "cards"}, "payload.items"),
    (
        "carousel-item",
        {"type": "carousel", "items": [{"title": 5, "actions": []}]},
        "payload.items[0].title",
    ),
    ("bloc", {"type": "bloc", "items": {"type": "text"}}, "payload.items"),
]


@pytest.mark.parametrize("kind", sorted(VALID_PAYLOADS))
def test_valid_payload(chat, kind):
    payload = VALID_PAYLOADS[kind]
    response = chat.send(payload)
    assert response.status_code == 201, response.content
    message = response.json()["message"]
    assert message["payload"] == payload
    row = Message.objects.get(id=message["id"])
    assert row.type == kind
    assert row.payload == payload


@pytest.mark.parametrize("kind", sorted(MINIMAL_PAYLOADS))
def test_minimal_payload(chat, kind):
    response = chat.send(MINIMAL_PAYLOADS[kind])
    assert response.status_code == 201, response.content


@pytest.mark.parametrize(
    ("case", "payload", "path"), MISSING_FIELD, ids=[c[0] for c in MISSING_FIELD]
)
def test_missing_required_field(chat, case, payload, path):
    assert_invalid_payload(chat.send(payload), path)
    assert counts() == (0, 0)


@pytest.mark.parametrize(("case", "payload", "path"), WRONG_TYPE, ids=[c[0] for c in WRONG_TYPE])
def test_wrong_type(chat, case, payload, path):
    assert_invalid_payload(chat.send(payload), path)
    assert counts() == (0, 0)


@pytest.mark.parametrize(
    ("item", "path"),
    [
        ({"type": "text", "payload": {}}, "payload.items[1].payload.text"),
        ({"type": "text"}, "payload.items[1].text"),
        ({"type": "text", "payload": {"text": 5}}, "payload.items[1].payload.text"),
        ({"type": "text", "text": 5}, "payload.items[1].text"),
        ({"type": "text", "payload": {"text": ""}}, "payload.items[1].payload.text"),
        (
            {"type": "location", "payload": {"latitude": "north", "longitude": 1}},
            "payload.items[1].payload.latitude",
        ),
        ({"type": "image", "imageUrl": 1}, "payload.items[1].imageUrl"),
    ],
)
def test_bloc_item_field_errors_name_the_item(chat, item, path):
    payload = {"type": "bloc", "items": [{"type": "text", "text": "ok"}, item]}
    assert_invalid_payload(chat.send(payload), path)
    assert counts() == (0, 0)


@pytest.mark.parametrize(
    "item",
    [
        {"type": "card", "title": "T", "actions": []},
        {"type": "choice", "text": "x", "options": []},
        {"type": "bloc", "items": [{"type": "text", "text": "x"}]},
        {"type": "nope", "text": "x"},
        {"text": "no type"},
        "text",
        {"type": "text", "payload": "hello"},
        {"type": "text", "payload": {"text": "x"}, "extra": 1},
        {"type": "text", "payload": {"text": "x", "extra": 1}},
        {"type": "text", "text": "x", "extra": 1},
    ],
)
def test_bad_bloc_item(chat, item):
    assert_invalid_payload(
        chat.send({"type": "bloc", "items": [{"type": "text", "text": "ok"}, item]})
    )
    assert counts() == (0, 0)


def test_bloc_items_in_both_forms(chat):
    items = [
        {"type": "text", "payload": {"text": "wrapped"}},
        {"type": "text", "text": "flat"},
        {"type": "markdown", "payload": {"markdown": "*m*"}},
        {"type": "audio", "audioUrl": "https://example.com/a.mp3"},
        {"type": "video", "payload": {"videoUrl": "https://example.com/a.mp4"}},
        {"type": "file", "fileUrl": "https://example.com/a.pdf", "title": "Doc"},
        {"type": "location", "payload": {"latitude": 1.5, "longitude": 2.5, "address": "A"}},
        {"type": "image", "imageUrl": "https://example.com/a.png"},
    ]
    response = chat.send({"type": "bloc", "items": items})
    assert response.status_code == 201, response.content
    assert response.json()["message"]["payload"] == {"type": "bloc", "items": items}


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "bloc", "items": []},
        {"type": "carousel", "items": []},
    ],
)
def test_empty_items_are_refused(chat, payload):
    assert_invalid_payload(chat.send(payload), "payload.items")


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "text", "text": ""},
        {"type": "markdown", "markdown": ""},
        {"type": "image", "imageUrl": ""},
        {"type": "choice", "text": "", "options": []},
        {"type": "card", "title": "T", "actions": [{"action": "say", "label": "", "value": "v"}]},
    ],
)
def test_empty_strings_are_refused(chat, payload):
    assert_invalid_payload(chat.send(payload), "payload.")
    assert counts() == (0, 0)


def test_empty_text_names_the_field(chat):
    assert_invalid_payload(chat.send({"type": "text", "text": ""}), "payload.text")


@pytest.mark.parametrize(
    ("payload", "path"),
    [
        ({"type": "location", "latitude": 91, "longitude": 0}, "payload.latitude"),
        ({"type": "location", "latitude": 0, "longitude": -180.5}, "payload.longitude"),
    ],
)
def test_location_out_of_range(chat, payload, path):
    assert_invalid_payload(chat.send(payload), path)


@pytest.mark.parametrize("kind", ["sticker", "", "TEXT", "Text"])
def test_unknown_payload_type(chat, kind):
    assert_invalid_payload(chat.send({"type": kind, "text": "hi"}), "payload.type")
    assert counts() == (0, 0)


@pytest.mark.parametrize("payload", [{"text": "no type"}, {"type": 5, "text": "x"}])
def test_missing_or_non_string_payload_type(chat, payload):
    assert_invalid_payload(chat.send(payload), "payload.type")


def test_unknown_field_in_payload(chat):
    assert_invalid_payload(
        chat.send({"type": "text", "text": "hi", "color": "red"}), "payload.color"
    )


def test_unknown_field_in_card_action(chat):
    payload = {
        "type": "card",
        "title": "T",
        "actions": [{"action": "say", "label": "x", "value": "y", "style": "bold"}],
    }
    assert_invalid_payload(chat.send(payload), "payload.actions[0].style")


@pytest.mark.parametrize("payload", ["hello", ["text"], None, 5])
def test_payload_not_an_object(chat, payload):
    assert_invalid_payload(chat.send(payload), "payload")


def test_unknown_body_field(chat):
    response = chat.send({"type": "text", "text": "hi"}, userId="alice")
    assert_invalid_payload(response, "userId")
    assert counts() == (0, 0)


def test_missing_payload(chat):
    assert_invalid_payload(chat.post({"conversationId": "support-1"}), "payload")


def test_missing_conversation_id(chat):
    assert_invalid_payload(chat.post({"payload": {"type": "text", "text": "hi"}}), "conversationId")


def test_conversation_id_not_a_string(chat):
    response = chat.post({"payload": {"type": "text", "text": "hi"}, "conversationId": 12})
    assert_invalid_payload(response, "conversationId")


@pytest.mark.parametrize("metadata", [["a"], "meta", 5, True])
def test_metadata_not_an_object(chat, metadata):
    response = chat.send({"type": "text", "text": "hi"}, metadata=metadata)
    assert_invalid_payload(response, "metadata")
    assert counts() == (0, 0)


def test_body_not_an_object(chat):
    assert_invalid_payload(chat.post([1, 2]))


def test_body_not_json(chat):
    response = APIClient().post(
        chat.messages_url,
        data="{not json",
        content_type="application/json",
        HTTP_X_USER_KEY=chat.key,
    )
    assert_invalid_payload(response)


def test_body_not_json_content_type(chat):
    response = APIClient().post(
        chat.messages_url,
        data="payload=x",
        content_type="application/x-www-form-urlencoded",
        HTTP_X_USER_KEY=chat.key,
    )
    assert_error(response, 415, "UnsupportedMediaType")


# --- reading, listing and deleting messages ---------------------------------


def keyed(chat: Chat, user: User) -> APIClient:
    return APIClient(HTTP_X_USER_KEY=user_key(chat.connection, user))


def message_url(chat: Chat, message_id: str) -> str:
    return f"{chat.messages_url}/{message_id}"


@pytest.fixture
def bob(chat) -> User:
    """A second participant of the conversation."""
    bob = UserFactory(bot=chat.bot, chat_id="bob")
    ParticipantFactory(conversation=chat.conversation, user=bob)
    return bob


@pytest.fixture
def stranger(chat) -> User:
    return UserFactory(bot=chat.bot, chat_id="stranger")


def test_get_a_message(chat, bob):
    created = chat.send({"type": "text", "text": "hi"}, metadata={"k": "v"}).json()["message"]
    response = keyed(chat, bob).get(message_url(chat, created["id"]))
    assert response.status_code == 200, response.content
    assert response.json() == {"message": created}


def test_get_a_bot_message_shows_its_authors_chat_id(chat):
    bot_user = UserFactory(bot=chat.bot, chat_id="the-bot")
    message = MessageFactory(conversation=chat.conversation, user=bot_user, is_bot=True)
    response = keyed(chat, chat.user).get(message_url(chat, message.id))
    assert response.status_code == 200, response.content
    assert response.json()["message"]["userId"] == "the-bot"
    assert response.json()["message"]["conversationId"] == "support-1"


def test_get_a_message_as_a_non_participant_is_403(chat, stranger):
    message = MessageFactory(conversation=chat.conversation, user=chat.user)
    response = keyed(chat, stranger).get(message_url(chat, message.id))
    body = assert_error(response, 403, "Forbidden")
    # The message does not tell an outsider which conversation it is in.
    assert "support-1" not in body["message"]


def test_get_an_unknown_message_is_404(chat):
    response = keyed(chat, chat.user).get(message_url(chat, "msg_01J00000000000000000000000"))
    assert_error(response, 404, "ResourceNotFound")


def test_get_a_message_of_another_bot_is_404(chat):
    other = MessageFactory()
    assert_error(keyed(chat, chat.user).get(message_url(chat, other.id)), 404, "ResourceNotFound")


@pytest.mark.parametrize("message_id", ["nope", "conv_01J0000000000000000000NONE", "msg_x"])
def test_get_a_message_by_an_impossible_id_is_400(chat, message_id):
    response = keyed(chat, chat.user).get(message_url(chat, message_id))
    assert_error(response, 400, "InvalidIdentifier")


def test_the_sender_deletes_a_message(chat):
    message = MessageFactory(conversation=chat.conversation, user=chat.user)
    kept = MessageFactory(conversation=chat.conversation, user=chat.user)
    response = keyed(chat, chat.user).delete(message_url(chat, message.id))
    assert response.status_code == 200, response.content
    assert response.json() == {}
    assert list(Message.objects.values_list("id", flat=True)) == [kept.id]
    gone = keyed(chat, chat.user).get(message_url(chat, message.id))
    assert_error(gone, 404, "ResourceNotFound")


def test_deleting_a_message_keeps_its_event(chat):
    message_id = chat.send({"type": "text", "text": "hi"}).json()["message"]["id"]
    assert keyed(chat, chat.user).delete(message_url(chat, message_id)).status_code == 200
    event = Event.objects.get(type="message_created")
    assert event.message_id is None


def test_another_participant_cannot_delete_a_message(chat, bob):
    message = MessageFactory(conversation=chat.conversation, user=chat.user)
    response = keyed(chat, bob).delete(message_url(chat, message.id))
    assert "sender" in assert_error(response, 403, "Forbidden")["message"]
    assert Message.objects.filter(pk=message.pk).exists()


def test_a_bot_message_in_the_users_name_cannot_be_deleted_by_them(chat):
    message = MessageFactory(conversation=chat.conversation, user=chat.user, is_bot=True)
    response = keyed(chat, chat.user).delete(message_url(chat, message.id))
    assert_error(response, 403, "Forbidden")
    assert Message.objects.filter(pk=message.pk).exists()


def test_a_non_participant_cannot_delete_a_message(chat, stranger):
    message = MessageFactory(conversation=chat.conversation, user=chat.user)
    response = keyed(chat, stranger).delete(message_url(chat, message.id))
    assert_error(response, 403, "Forbidden")
    assert Message.objects.filter(pk=message.pk).exists()


def test_deleting_an_unknown_message_is_404(chat):
    response = keyed(chat, chat.user).delete(message_url(chat, "msg_01J00000000000000000000000"))
    assert_error(response, 404, "ResourceNotFound")


def conversation_messages_url(chat: Chat, chat_id: str = "support-1") -> str:
    return f"/chat/{chat.connection.webhook_id}/conversations/{chat_id}/messages"


def test_list_a_conversations_messages_newest_first_with_the_bots(chat, bob):
    bot_user = UserFactory(bot=chat.bot, chat_id="the-bot")
    mine = MessageFactory(conversation=chat.conversation, user=chat.user)
    reply = MessageFactory(conversation=chat.conversation, user=bot_user, is_bot=True)
    theirs = MessageFactory(conversation=chat.conversation, user=bob, metadata={"a": 1})
    MessageFactory(user=chat.user, conversation=ConversationFactory(bot=chat.bot))
    response = keyed(chat, chat.user).get(conversation_messages_url(chat))
    assert response.status_code == 200, response.content
    body = response.json()
    assert [m["id"] for m in body["messages"]] == [theirs.id, reply.id, mine.id]
    assert [m["userId"] for m in body["messages"]] == ["bob", "the-bot", "alice"]
    assert body["messages"][0]["metadata"] == {"a": 1}
    assert "metadata" not in body["messages"][1]
    assert body["meta"] == {}


def test_list_messages_of_a_conversation_whose_id_holds_slashes(chat):
    conversation = ConversationFactory(bot=chat.bot, chat_id="a/b/messages", owner=chat.user)
    ParticipantFactory(conversation=conversation, user=chat.user)
    message = MessageFactory(conversation=conversation, user=chat.user)
    response = keyed(chat, chat.user).get(conversation_messages_url(chat, "a/b/messages"))
    assert response.status_code == 200, response.content
    assert [m["id"] for m in response.json()["messages"]] == [message.id]


def test_list_messages_in_pages(chat):
    made = [MessageFactory(conversation=chat.conversation, user=chat.user) for _ in range(7)]
    client = keyed(chat, chat.user)
    seen: list[str] = []
    pages = 0
    query: dict[str, Any] = {"pageSize": 3}
    while True:
        body = client.get(conversation_messages_url(chat), query).json()
        pages += 1
        seen += [m["id"] for m in body["messages"]]
        if "nextToken" not in body["meta"]:
            break
        query["nextToken"] = body["meta"]["nextToken"]
    assert pages == 3
    assert seen == [m.id for m in reversed(made)]


def test_a_token_of_another_conversations_messages_is_400(chat):
    for _ in range(2):
        MessageFactory(conversation=chat.conversation, user=chat.user)
    other = ConversationFactory(bot=chat.bot, chat_id="other", owner=chat.user)
    ParticipantFactory(conversation=other, user=chat.user)
    client = keyed(chat, chat.user)
    token = client.get(conversation_messages_url(chat), {"pageSize": 1}).json()["meta"]["nextToken"]
    response = client.get(conversation_messages_url(chat, "other"), {"nextToken": token})
    assert_error(response, 400, "InvalidQuery")


@pytest.mark.parametrize("query", [{"nextToken": "garbage"}, {"pageSize": "-1"}])
def test_list_messages_with_a_bad_query_is_400(chat, query):
    response = keyed(chat, chat.user).get(conversation_messages_url(chat), query)
    assert_error(response, 400, "InvalidQuery")


def test_list_messages_as_a_non_participant_is_403(chat, stranger):
    response = keyed(chat, stranger).get(conversation_messages_url(chat))
    assert_error(response, 403, "Forbidden")


def test_list_messages_of_an_unknown_conversation_is_404(chat):
    response = keyed(chat, chat.user).get(conversation_messages_url(chat, "nope"))
    assert_error(response, 404, "ResourceNotFound")


def test_list_messages_query_count(chat, bob, django_assert_num_queries):
    for author in (chat.user, bob, chat.user):
        MessageFactory(conversation=chat.conversation, user=author)
    client = keyed(chat, chat.user)
    # The connection, the key's user, the workspace's rate limits (kept a
    # while by each process, like the first two), the conversation with the
    # caller's part in it, and the page with each message's author and
    # conversation.
    with django_assert_num_queries(5):
        response = client.get(conversation_messages_url(chat))
    assert len(response.json()["messages"]) == 3
