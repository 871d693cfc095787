"""The whole loop between an end user and a bot, every part real: uvicorn
serving the app, a Celery worker delivering events, and examples/echo_bot.py
as the bot. A user posts a text; the bot's webhook receives the signed
`message_created` event; the bot replies through the runtime API; the user
sees the reply in the conversation's messages and on its live stream."""

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from bots.models import Bot, Role
from events.models import Event, EventStatus
from examples.echo_bot import EchoBot, server
from tests.factories import ChatConnectionFactory, member_token
from tests.servers import READ_TIMEOUT, celery_queue, servers, sse_messages  # noqa: F401
from tests.worker import wait_until, workers  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@dataclass(frozen=True)
class Delivery:
    headers: dict[str, str]
    body: bytes
    status: int

    @property
    def webhook_id(self) -> str | None:
        return {name.lower(): value for name, value in self.headers.items()}.get("webhook-id")


class RecordingEchoBot(EchoBot):
    """The example bot, keeping what it was sent and what it answered."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self.deliveries: list[Delivery] = []

    def receive(self, headers: dict[str, str], body: bytes) -> int:
        status = super().receive(headers, body)
        self.deliveries.append(Delivery(headers=headers, body=body, status=status))
        return status


@pytest.fixture
def echo_bot(bot: Bot, servers) -> Iterator[tuple[RecordingEchoBot, Any]]:  # noqa: F811
    """The web server, and the echo bot listening on a free port, with the
    bot's webhook pointed at it."""
    web = servers()
    echo = RecordingEchoBot(
        api_url=web.url,
        token=member_token(bot.workspace, Role.DEVELOPER),
        bot_id=bot.id,
        secret=bot.signing_secret,
    )
    httpd = server(echo, "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    Bot.objects.filter(pk=bot.pk).update(webhook_url=f"http://127.0.0.1:{httpd.server_port}/")
    try:
        yield echo, web
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_user_and_a_bot_talk(bot, echo_bot, workers):  # noqa: F811
    echo, web = echo_bot
    workers.start(beat=False)
    chat = f"{web.url}/chat/{ChatConnectionFactory(bot=bot).webhook_id}"
    with httpx.Client(timeout=READ_TIMEOUT) as client:
        created = client.post(f"{chat}/users", json={"name": "Ada"})
        assert created.status_code == 201, created.text
        headers = {"x-user-key": created.json()["key"]}
        user_id = created.json()["user"]["id"]
        conversation = client.post(f"{chat}/conversations", json={}, headers=headers)
        assert conversation.status_code == 201, conversation.text
        conversation_id = conversation.json()["conversation"]["id"]

        listen = f"{chat}/conversations/{conversation_id}/listen"
        with client.stream("GET", listen, headers=headers) as stream:
            assert stream.status_code == 200
            heard = (m for m in sse_messages(stream) if m["type"] != "ping")

            sent = client.post(
                f"{chat}/messages",
                json={
                    "conversationId": conversation_id,
                    "payload": {"type": "text", "text": "Hello bot"},
                },
                headers=headers,
            )
            assert sent.status_code == 201, sent.text
            message = sent.json()["message"]

            # The user's own message, then the bot's reply, on the stream.
            assert next(heard) == {"type": "message_created", "data": {**message, "isBot": False}}
            reply = next(heard)
        assert reply["type"] == "message_created"
        assert reply["data"]["isBot"] is True
        assert reply["data"]["payload"] == {"type": "text", "text": "You said: Hello bot"}
        assert reply["data"]["conversationId"] == conversation_id
        assert reply["data"]["userId"] == f"bot:{bot.id}"

        # The bot got one delivery: signed (the echo bot verified it, or it
        # would have answered 401), the user's message as a message_created event.
        [event] = Event.objects.filter(bot=bot, message_id=message["id"])
        # Recorded once the bot answers, which is after its reply was sent.
        [delivery] = wait_until(
            lambda: [d for d in echo.deliveries if d.webhook_id == event.id],
            timeout=READ_TIMEOUT,
            message="the echo bot to answer the delivery",
        )
        assert delivery.status == 200
        body = json.loads(delivery.body)
        assert body["type"] == "message_created"
        assert body["payload"]["message"]["id"] == message["id"]
        assert body["payload"]["message"]["payload"] == {"type": "text", "text": "Hello bot"}
        assert body["payload"]["user"]["tags"] == {}
        assert body["conversationId"] == event.conversation_id
        wait_until(
            lambda: Event.objects.get(pk=event.pk).status == EventStatus.PROCESSED,
            timeout=READ_TIMEOUT,
            message="the delivered event to be processed",
        )

        # listMessages: newest first, the reply above the user's message.
        listed = client.get(f"{chat}/conversations/{conversation_id}/messages", headers=headers)
        assert listed.status_code == 200, listed.text
        messages = listed.json()["messages"]
        assert [m["id"] for m in messages] == [reply["data"]["id"], message["id"]]
        assert [m["userId"] for m in messages] == [f"bot:{bot.id}", user_id]
    # The bot's own reply is no event for the bot: nothing loops.
    assert Event.objects.filter(bot=bot).count() == 1
