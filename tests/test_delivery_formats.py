"""A bot's delivery format: `standard` (the event, signed) or `botpress`, the
request the official SDK's bot server reads (@botpress/sdk: bot/server/
context.ts reads x-bot-id, x-bp-operation, x-bp-type and x-bp-configuration;
index.ts parses `{"event": …}` and hands `event.payload.message`, `.user` and
`.conversation` of a message_created to the message handlers)."""

import base64
import json
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from standardwebhooks.webhooks import Webhook

from bots.models import Bot, DeliveryFormat
from bots.services.bots import bot_update, bot_user_get_or_create
from chat.services.conversations import conversation_create
from chat.services.messages import chat_message_create
from events.engine.claims import deliveries_claim
from events.models import EventStatus
from events.services.events import EventReferences, event_record
from tests.delivering import deliver_claimed
from tests.factories import BotFactory, ConversationFactory, UserFactory
from tests.receiver import Answer, Receiver

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def engine_settings(settings):
    settings.EVENT_LEASE_SECONDS = 60.0
    settings.EVENT_DELIVERY_TIMEOUT = 5.0


@pytest.fixture
def sdk_bot(hooked: Bot) -> Bot:
    return bot_update(bot=hooked, delivery_format=DeliveryFormat.BOTPRESS)


def deliver_all() -> dict[str, int]:
    return deliver_claimed(deliveries_claim(limit=50))


def configuration_of(received: Any) -> Any:
    return json.loads(base64.b64decode(received.headers["x-bp-configuration"]))


def test_botpress_format_sends_what_the_sdk_reads(sdk_bot, receiver: Receiver):
    conversation = ConversationFactory(bot=sdk_bot)
    user = UserFactory(bot=sdk_bot)
    event = event_record(
        bot_id=sdk_bot.id,
        type="order.created",
        payload={"text": "héllo ✓"},
        references=EventReferences(conversation=conversation, user=user),
    )
    assert deliver_all() == {"processed": 1}

    [received] = receiver.requests
    headers = received.headers
    assert headers["x-bot-id"] == sdk_bot.id
    assert headers["x-bp-operation"] == "event_received"
    assert headers["x-bp-type"] == "order.created"
    assert configuration_of(received) == {}
    assert headers["x-bot-user-id"] == bot_user_get_or_create(bot=sdk_bot).id
    assert headers["Content-Type"] == "application/json"
    assert received.json() == {
        "event": {
            "id": event.id,
            "createdAt": event.created_at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "type": "order.created",
            "payload": {"text": "héllo ✓"},
            "status": "pending",
            "failureReason": None,
            "conversationId": conversation.id,
            "userId": user.id,
        }
    }
    # Signed as every delivery is, over the body as sent.
    Webhook(sdk_bot.signing_secret).verify(received.body, headers)
    assert headers["webhook-id"] == event.id


def test_the_sdk_gets_the_bots_configuration(sdk_bot, receiver):
    bot_update(bot=sdk_bot, configuration={"greeting": "Bonjour ✓", "n": [1, None]})
    event_record(bot_id=sdk_bot.id, type="custom", payload={})
    deliver_all()
    assert configuration_of(receiver.requests[0]) == {"greeting": "Bonjour ✓", "n": [1, None]}


def test_a_message_created_carries_the_message_its_user_and_conversation(sdk_bot, receiver):
    alice = UserFactory(bot=sdk_bot, chat_id="alice")
    conversation = conversation_create(creator=alice, chat_id="room")
    message = chat_message_create(
        user=alice, conversation_chat_id="room", payload={"type": "text", "text": "Hi"}
    )
    assert deliver_all() == {"processed": 1}

    [received] = receiver.requests
    assert received.headers["x-bp-type"] == "message_created"
    event = received.json()["event"]
    assert event["type"] == "message_created"
    assert (event["conversationId"], event["userId"], event["messageId"]) == (
        conversation.id,
        alice.id,
        message.id,
    )
    payload = event["payload"]
    assert set(payload) == {"message", "user", "conversation"}
    assert payload["message"]["id"] == message.id
    assert payload["message"]["type"] == "text"
    assert payload["message"]["payload"] == {"type": "text", "text": "Hi"}
    assert payload["message"]["conversationId"] == conversation.id
    assert payload["user"]["id"] == alice.id
    assert payload["conversation"]["id"] == conversation.id


@pytest.mark.parametrize(
    ("event_type", "header"),
    [
        ("state_expired", "state_expired"),
        ("evil\r\nx-bot-id: bot_forged", "evil%0D%0Ax-bot-id: bot_forged"),
        ("commande.passée", "commande.pass%C3%A9e"),
    ],
)
def test_an_event_type_cannot_break_out_of_its_header(sdk_bot, receiver, event_type, header):
    event_record(bot_id=sdk_bot.id, type=event_type, payload={})
    assert deliver_all() == {"processed": 1}
    [received] = receiver.requests
    assert received.headers["x-bp-type"] == header
    assert received.headers["x-bot-id"] == sdk_bot.id
    assert received.json()["event"]["type"] == event_type


def test_standard_format_is_unchanged(hooked, receiver):
    event = event_record(bot_id=hooked.id, type="order.created", payload={"a": 1})
    deliver_all()
    [received] = receiver.requests
    assert not [name for name in received.headers if name.lower().startswith(("x-bp", "x-bot"))]
    assert received.json()["id"] == event.id
    assert received.json()["botId"] == hooked.id


def test_a_bot_user_deleted_meanwhile_leaves_the_header_out(sdk_bot, receiver):
    bot_user_get_or_create(bot=sdk_bot).delete()
    event_record(bot_id=sdk_bot.id, type="custom", payload={})
    assert deliver_all() == {"processed": 1}
    assert "x-bot-user-id" not in receiver.requests[0].headers


def test_an_sdk_answer_of_200_with_an_empty_object_is_a_success(sdk_bot, receiver):
    receiver.answer(Answer(200, b"{}", {"Content-Type": "application/json"}))
    event = event_record(bot_id=sdk_bot.id, type="custom", payload={})
    assert deliver_all() == {"processed": 1}
    event.refresh_from_db()
    assert event.status == EventStatus.PROCESSED


def test_claiming_many_bots_of_both_formats_takes_no_query_per_event(receiver):
    def queries_to_deliver(bots: list[Bot]) -> int:
        for bot in bots:
            event_record(bot_id=bot.id, type="custom", payload={})
        with CaptureQueriesContext(connection) as captured:
            assert deliver_all() == {"processed": len(bots)}
        return len(captured.captured_queries)

    def bot(delivery_format: str) -> Bot:
        made = BotFactory(webhook_url=receiver.url)
        return bot_update(bot=made, delivery_format=delivery_format, configuration={"k": made.id})

    one = queries_to_deliver([bot(DeliveryFormat.BOTPRESS)])
    many = queries_to_deliver(
        [bot(DeliveryFormat.BOTPRESS) for _ in range(4)]
        + [bot(DeliveryFormat.STANDARD) for _ in range(4)]
    )
    assert many == one
    sdk_requests = [r for r in receiver.requests if "x-bp-configuration" in r.headers]
    assert len({configuration_of(r)["k"] for r in sdk_requests}) == len(sdk_requests) == 5
