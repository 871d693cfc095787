"""The live stream served by real uvicorn processes on the test database,
listened to over HTTP as a browser would."""

from typing import Any

import httpx
import pytest
from django.conf import settings as django_settings

from bots.models import Bot
from chat.live.publish import stream_publish
from tests.factories import (
    ChatConnectionFactory,
    ConversationFactory,
    ParticipantFactory,
    UserFactory,
    user_key,
)
from tests.servers import READ_TIMEOUT, Server, celery_queue, servers, sse_messages  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def chat(bot: Bot) -> dict[str, Any]:
    connection = ChatConnectionFactory(bot=bot)
    user = UserFactory(bot=bot, chat_id="alice")
    conversation = ConversationFactory(bot=bot, chat_id="support/1", owner=user)
    ParticipantFactory(conversation=conversation, user=user)
    return {
        "base": f"/chat/{connection.webhook_id}",
        "key": user_key(connection, user),
        "conversation": conversation,
    }


def post_message(server: Any, chat: dict[str, Any], text: str) -> dict[str, Any]:
    response = httpx.post(
        f"{server.url}{chat['base']}/messages",
        json={
            "conversationId": chat["conversation"].chat_id,
            "payload": {"type": "text", "text": text},
        },
        headers={"x-user-key": chat["key"]},
        timeout=READ_TIMEOUT,
    )
    assert response.status_code == 201, response.text
    return response.json()["message"]


def test_a_listener_hears_a_message_posted_to_the_same_server(servers, chat):  # noqa: F811
    server = servers()
    listen_url = f"{server.url}{chat['base']}/conversations/support/1/listen"
    with (
        httpx.Client(timeout=READ_TIMEOUT) as client,
        client.stream("GET", listen_url, headers={"x-user-key": chat["key"]}) as stream,
    ):
        assert stream.status_code == 200
        assert stream.headers["content-type"] == "text/event-stream"
        assert stream.headers["cache-control"] == "no-cache"
        assert stream.headers["x-accel-buffering"] == "no"
        messages = sse_messages(stream)
        assert next(messages) == {"type": "ping", "data": {}}
        message = post_message(server, chat, "hello over HTTP")
        assert next(messages) == {"type": "message_created", "data": {**message, "isBot": False}}


@pytest.mark.skipif(
    not django_settings.LIVE_STREAM_REDIS_URL,
    reason="no Redis configured: LIVE_STREAM_REDIS_URL is empty, and the in-process bus "
    "of the embedded defaults carries nothing between processes",
)
def test_what_other_processes_publish_reaches_the_listener_through_redis(servers, chat):  # noqa: F811
    listening, posting = servers(), servers()
    listen_url = f"{listening.url}{chat['base']}/conversations/support/1/listen"
    with (
        httpx.Client(timeout=READ_TIMEOUT) as client,
        client.stream("GET", listen_url, headers={"x-user-key": chat["key"]}) as stream,
    ):
        messages = sse_messages(stream)
        assert next(messages) == {"type": "ping", "data": {}}
        # From this process (as a Celery worker would publish) ...
        data = {"id": "msg_x", "conversationId": "support/1", "userId": "alice"}
        stream_publish(conversation_id=chat["conversation"].id, type="message_deleted", data=data)
        assert next(messages) == {"type": "message_deleted", "data": data}
        # ... and from another web process.
        message = post_message(posting, chat, "hello from the other process")
        assert next(messages) == {"type": "message_created", "data": {**message, "isBot": False}}
