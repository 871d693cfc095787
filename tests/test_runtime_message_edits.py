"""PUT and DELETE /v1/chat/messages/{id}: a bot changes or deletes any
message of its conversations (users' too), or one still scheduled; what the
conversation's listeners hear; refusals in the one error body."""

from typing import Any

import pytest

from bots.models import Bot, Conversation, Message, User
from chat.live.bus import conversation_channel
from chat.models import ScheduledMessage
from events.models import Event
from tests.conftest import assert_error
from tests.factories import (
    BotFactory,
    ConversationFactory,
    MessageFactory,
    ScheduledMessageFactory,
    UserFactory,
)
from tests.test_chat_publishing import RecordingBus, bus, committed  # noqa: F401

pytestmark = pytest.mark.django_db

URL = "/v1/chat/messages"
TEXT = {"type": "text", "text": "hello"}


@pytest.fixture
def conversation(bot: Bot) -> Conversation:
    return ConversationFactory(bot=bot, chat_id="room")


@pytest.fixture
def alice(bot: Bot) -> User:
    return UserFactory(bot=bot, chat_id="alice")


@pytest.fixture
def message(conversation: Conversation, alice: User) -> Message:
    """A message alice sent through the chat interface."""
    return MessageFactory(conversation=conversation, user=alice, tags={"keep": "1", "drop": "2"})


@pytest.fixture
def scheduled(bot: Bot, conversation: Conversation, alice: User) -> ScheduledMessage:
    return ScheduledMessageFactory(conversation=conversation, user=alice, tags={"step": "1"})


def put(client: Any, message_id: str, body: Any) -> Any:
    return client.put(f"{URL}/{message_id}", body, format="json")


def updated(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"message"}
    return body["message"]


# --- update ---------------------------------------------------------------------------------


def test_tags_are_merged(runtime_client, message):
    answer = updated(put(runtime_client(), message.id, {"tags": {"drop": None, "new": "3"}}))
    assert answer["tags"] == {"keep": "1", "new": "3"}
    assert answer["payload"] == TEXT and answer["direction"] == "incoming"
    message.refresh_from_db()
    assert message.tags == {"keep": "1", "new": "3"}
    assert answer["updatedAt"] > answer["createdAt"]


@pytest.mark.parametrize(
    "payload",
    [{"text": "edited"}, {"type": "text", "text": "edited"}],
    ids=["type left out", "type carried"],
)
def test_the_payload_is_replaced(runtime_client, message, payload):
    answer = updated(put(runtime_client(), message.id, {"payload": payload}))
    assert (answer["type"], answer["payload"]) == ("text", {"type": "text", "text": "edited"})
    message.refresh_from_db()
    assert (message.type, message.payload) == ("text", {"type": "text", "text": "edited"})
    assert message.tags == {"keep": "1", "drop": "2"}


@pytest.mark.parametrize(
    ("payload", "named"),
    [
        ({"type": "image", "imageUrl": "https://example.com/a.png"}, "payload.type"),
        ({"type": "sticker"}, "payload.type"),
        ({}, "payload.text"),
        ({"text": 5}, "payload.text"),
        ({"text": "hi", "color": "red"}, "payload.color"),
    ],
)
def test_a_payload_that_is_no_payload_of_its_type(runtime_client, message, payload, named):
    response = put(runtime_client(), message.id, {"payload": payload, "tags": {"x": "1"}})
    assert named in assert_error(response, 400, "InvalidPayload")["message"]
    message.refresh_from_db()
    # Nothing half-written: the tags are as they were too.
    assert (message.payload, message.tags) == (TEXT, {"keep": "1", "drop": "2"})


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"payload": "text"}, "payload"),
        ({"tags": {"k": 1}}, "tags"),
        ({"type": "text"}, "type"),
        ({"conversationId": "conv_01J00000000000000000000001"}, "conversationId"),
    ],
)
def test_update_refuses_a_bad_body(runtime_client, message, body, named):
    assert (
        named
        in assert_error(put(runtime_client(), message.id, body), 400, "InvalidPayload")["message"]
    )


def test_a_bots_message_is_updated_too(runtime_client, conversation, alice):
    reply = MessageFactory(conversation=conversation, user=alice, is_bot=True)
    answer = updated(put(runtime_client(), reply.id, {"payload": {"text": "fixed"}}))
    assert answer["direction"] == "outgoing"


def test_a_scheduled_message_is_updated_before_it_is_sent(runtime_client, scheduled):
    body = {"tags": {"step": "2"}, "payload": {"text": "sooner"}}
    answer = updated(put(runtime_client(), scheduled.id, body))
    assert answer["id"] == scheduled.id
    assert answer["createdAt"] == answer["updatedAt"]
    assert (answer["tags"], answer["payload"]) == (
        {"step": "2"},
        {"type": "text", "text": "sooner"},
    )
    scheduled.refresh_from_db()
    assert scheduled.tags == {"step": "2"} and scheduled.payload["text"] == "sooner"
    assert not Message.objects.exists()


def test_listeners_hear_a_new_payload(runtime_client, conversation, message, bus, committed):  # noqa: F811
    answer = updated(
        committed(lambda: put(runtime_client(), message.id, {"payload": {"text": "edited"}}))
    )
    assert bus.sent == [
        (
            conversation_channel(conversation.id),
            {
                "type": "message_updated",
                # As the chat interface shows it: chat ids, and isBot.
                "data": {
                    "id": message.id,
                    "createdAt": answer["createdAt"],
                    "payload": {"type": "text", "text": "edited"},
                    "userId": "alice",
                    "conversationId": "room",
                    "isBot": False,
                },
            },
        )
    ]


def test_listeners_hear_nothing_of_tags_or_of_the_same_payload(
    runtime_client,
    message,
    scheduled,
    bus,  # noqa: F811
    committed,  # noqa: F811
):
    client = runtime_client()
    updated(committed(lambda: put(client, message.id, {"tags": {"seen": "1"}})))
    updated(committed(lambda: put(client, message.id, {"payload": TEXT})))
    # Nor of a message not sent yet.
    updated(committed(lambda: put(client, scheduled.id, {"payload": {"text": "x"}})))
    assert bus.sent == []


def test_an_update_is_no_event_for_the_bot(runtime_client, message):
    updated(put(runtime_client(), message.id, {"payload": {"text": "edited"}}))
    assert Event.objects.count() == 0


# --- delete ---------------------------------------------------------------------------------


def test_delete_a_users_message(runtime_client, conversation, message, bus, committed):  # noqa: F811
    response = committed(lambda: runtime_client().delete(f"{URL}/{message.id}"))
    assert (response.status_code, response.json()) == (200, {})
    assert not Message.objects.exists()
    assert bus.sent == [
        (
            conversation_channel(conversation.id),
            {
                "type": "message_deleted",
                "data": {"id": message.id, "conversationId": "room", "userId": "alice"},
            },
        )
    ]
    assert_error(runtime_client().get(f"{URL}/{message.id}"), 404, "ResourceNotFound")
    assert_error(runtime_client().delete(f"{URL}/{message.id}"), 404, "ResourceNotFound")


def test_deleting_a_scheduled_message_cancels_it(runtime_client, scheduled, bus, committed):  # noqa: F811
    response = committed(lambda: runtime_client().delete(f"{URL}/{scheduled.id}"))
    assert (response.status_code, response.json()) == (200, {})
    assert not ScheduledMessage.objects.exists() and not Message.objects.exists()
    assert bus.sent == []


# --- ids, tenants and roles -----------------------------------------------------------------


@pytest.mark.parametrize("method", ["put", "delete"])
def test_a_message_of_another_bot(runtime_client, bot, method):
    theirs = MessageFactory(
        conversation=ConversationFactory(bot=BotFactory(workspace=bot.workspace))
    )
    response = getattr(runtime_client(), method)(f"{URL}/{theirs.id}", {}, format="json")
    assert_error(response, 404, "ResourceNotFound")
    assert Message.objects.filter(pk=theirs.pk, payload=TEXT).exists()


@pytest.mark.parametrize("method", ["put", "delete"])
@pytest.mark.parametrize("message_id", ["msg_short", "evt_01J00000000000000000000001"])
def test_a_malformed_id(runtime_client, method, message_id):
    response = getattr(runtime_client(), method)(f"{URL}/{message_id}", {}, format="json")
    assert_error(response, 400, "InvalidIdentifier")


@pytest.mark.parametrize("method", ["put", "delete"])
def test_an_id_that_names_nothing(runtime_client, method):
    response = getattr(runtime_client(), method)(
        f"{URL}/msg_01J0000000000000000000ZZZZ", {}, format="json"
    )
    assert_error(response, 404, "ResourceNotFound")


@pytest.mark.parametrize("role", ["viewer", "billing"])
def test_viewer_and_billing_may_not(runtime_client, message, role):
    client = runtime_client(role)
    assert_error(put(client, message.id, {"tags": {"k": "v"}}), 403, "Forbidden")
    assert_error(client.delete(f"{URL}/{message.id}"), 403, "Forbidden")
    message.refresh_from_db()
    assert message.tags == {"keep": "1", "drop": "2"}


def test_query_count_of_an_update(runtime_client, message, django_assert_max_num_queries):
    client = runtime_client()
    updated(put(client, message.id, {"tags": {"n": "0"}}))
    # savepoint; the message locked with its conversation and user; update; release
    with django_assert_max_num_queries(4):
        updated(put(client, message.id, {"tags": {"n": "1"}, "payload": {"text": "edited"}}))
