"""Scheduled bot messages end to end: made through the runtime API, turned
into messages by a real Celery worker's claim when due, and streamed to the
conversation's listeners: over Redis where settings name it, else through
the in-process bus's relay (chat/live/relay.py).

Waits poll; nothing here asserts on speed."""

import asyncio
import json
import threading
from typing import Any

import pytest

from bots.models import Conversation, Message, User
from chat.live.bus import conversation_channel, live_bus
from chat.live.subscriptions import Inbox
from chat.models import ScheduledMessage
from tests.factories import ConversationFactory, UserFactory
from tests.worker import celery_queue, wait_until, workers

__all__ = ["celery_queue", "workers"]  # fixtures, used by name

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

URL = "/v1/chat/messages"
TEXT = {"type": "text", "text": "Your table is ready"}


def schedule(
    client: Any, conversation: Conversation, author: User, delay_ms: int
) -> dict[str, Any]:
    response = client.post(
        URL,
        {
            "conversationId": conversation.id,
            "userId": author.id,
            "payload": TEXT,
            "schedule": {"delay": delay_ms},
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    message: dict[str, Any] = response.json()["message"]
    return message


class Listening:
    """A listener of the conversation on this process's bus (the one a web
    process serving the live stream uses), on a loop of its own."""

    def __init__(self, conversation: Conversation) -> None:
        self.channel = conversation_channel(conversation.id)
        self.joined = threading.Event()
        self.heard: list[str] = []
        self._thread = threading.Thread(target=asyncio.run, args=(self._listen(),), daemon=True)
        self._thread.start()
        assert self.joined.wait(10), "the listener did not join"

    async def _listen(self) -> None:
        bus = live_bus()
        inbox = Inbox(capacity=10, loop=asyncio.get_running_loop())
        await bus.join(self.channel, inbox)
        self.joined.set()
        try:
            self.heard.append(await asyncio.wait_for(inbox.get(), timeout=60))
        finally:
            bus.leave(self.channel, inbox)

    def message(self, timeout: float) -> dict[str, Any]:
        self._thread.join(timeout)
        assert self.heard, "the listener heard nothing"
        heard: dict[str, Any] = json.loads(self.heard[0])
        return heard


def test_a_worker_makes_and_streams_the_message_when_due(runtime_client, bot, workers):
    conversation = ConversationFactory(bot=bot, chat_id="table-7")
    author = UserFactory(bot=bot, chat_id="host")
    listening = Listening(conversation)
    workers.start(beat=False)
    client = runtime_client()

    # Seconds ahead, so that a loaded machine still reads it scheduled.
    answered = schedule(client, conversation, author, 3000)
    assert not Message.objects.exists()
    assert client.get(f"{URL}/{answered['id']}").status_code == 404

    row = wait_until(
        lambda: Message.objects.filter(id=answered["id"]).first(),
        message="the scheduled message was made",
        workers=workers,
    )
    assert not ScheduledMessage.objects.exists()
    assert row.is_bot and (row.conversation_id, row.user_id) == (conversation.id, author.id)
    fetched = client.get(f"{URL}/{answered['id']}")
    assert fetched.status_code == 200
    assert fetched.json()["message"] == answered

    # Over Redis, or, on the embedded defaults, the in-process bus's relay.
    assert listening.message(timeout=30) == {
        "type": "message_created",
        "data": {
            "id": answered["id"],
            "createdAt": answered["createdAt"],
            "conversationId": "table-7",
            "userId": "host",
            "payload": TEXT,
            "isBot": True,
        },
    }


def test_a_message_whose_conversation_is_deleted_first_is_never_made(runtime_client, bot, workers):
    doomed = ConversationFactory(bot=bot)
    kept = ConversationFactory(bot=bot)
    author = UserFactory(bot=bot)
    workers.start(beat=False)
    client = runtime_client()

    schedule(client, doomed, author, 2000)
    later = schedule(client, kept, author, 3000)
    doomed.delete()

    # The later message is made after the canceled one's time has passed.
    wait_until(
        lambda: Message.objects.filter(id=later["id"]).exists(),
        message="the later message was made",
        workers=workers,
    )
    assert list(Message.objects.values_list("id", flat=True)) == [later["id"]]
    assert not ScheduledMessage.objects.exists()
