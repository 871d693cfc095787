"""Scheduled bot messages end to end: made through the runtime API, turned
into messages by a real Celery worker's claim when due, and streamed to the
conversation's listeners over Redis (where settings name it; the embedded
defaults' in-process bus cannot carry what a worker publishes).

Waits poll; nothing here asserts on speed."""

import json
from typing import Any

import pytest
import redis
from django.conf import settings as django_settings
from redis.connection import parse_url

from bots.models import Conversation, Message, User
from chat.live.bus import conversation_channel
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


def test_a_worker_makes_and_streams_the_message_when_due(runtime_client, bot, workers):
    conversation = ConversationFactory(bot=bot, chat_id="table-7")
    author = UserFactory(bot=bot, chat_id="host")
    listener = None
    if django_settings.LIVE_STREAM_REDIS_URL:
        url = django_settings.LIVE_STREAM_REDIS_URL
        listener = redis.Redis.from_url(url).pubsub()
        # The bus names channels with the database number (chat/live/redis_bus.py).
        database = parse_url(url).get("db", 0)
        listener.subscribe(f"db{database}:{conversation_channel(conversation.id)}")
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

    if listener is not None:
        published = wait_until(
            lambda: listener.get_message(ignore_subscribe_messages=True, timeout=0.1),
            message="the message reached the conversation's channel",
            workers=workers,
        )
        listener.close()
        assert json.loads(published["data"]) == {
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
