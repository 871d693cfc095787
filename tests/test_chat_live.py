"""The live stream in-process: GET .../conversations/{id}/listen through the
ASGI application (platform_site.asgi), called by hand on an event loop in a
thread of its own as a server would, on the in-process bus.

The listener's requests run their database lookups on the handler's own
threads, so the tests commit (transaction=True)."""

import asyncio
import gc
import json
import queue
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import jwt
import pytest
from django.db import transaction
from rest_framework.test import APIClient

from bots.models import Bot, Conversation, User
from chat.live.bus import conversation_channel, live_bus
from chat.live.publish import stream_publish
from chat.live.stream import PING, removes_listener
from chat.live.subscriptions import Inbox, ListenerDropped, Subscription
from chat.models import ChatConnection
from platform_site import asgi
from tests.conftest import Answer, assert_error
from tests.factories import (
    BotFactory,
    ChatConnectionFactory,
    ConversationFactory,
    ParticipantFactory,
    UserFactory,
    user_key,
)

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 5.0
T = TypeVar("T")


@pytest.fixture(autouse=True)
def in_process_bus(settings: Any) -> None:
    settings.LIVE_STREAM_REDIS_URL = ""


class ServerLoop:
    """An event loop running in a thread of its own, like a server's; the
    test drives coroutines on it from its own thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = TIMEOUT) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def call(self, function: Callable[[], None]) -> None:
        self.loop.call_soon_threadsafe(function)

    def close(self) -> None:
        async def cancel_the_rest() -> None:
            tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            # Bounded: on Python 3.11 asyncio.timeout inside redis-py can swallow
            # a cancellation that coincides with its own, leaving a Redis reader
            # waiting for good. A server's loop simply stops at shutdown; so does this one.
            if tasks:
                await asyncio.wait(tasks, timeout=TIMEOUT)

        self.run(cancel_the_rest(), timeout=2 * TIMEOUT)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(TIMEOUT)
        self.loop.close()


@pytest.fixture
def server() -> Iterator[ServerLoop]:
    running = ServerLoop()
    yield running
    running.close()


class Exchange:
    """One request to the ASGI application as a server makes it: the test
    reads what the application sends, can stop reading (a slow client) and
    can hang up."""

    def __init__(
        self, server: ServerLoop, path: str, *, method: str = "GET", headers: dict[str, str]
    ) -> None:
        self.server = server
        self.sent: queue.Queue[dict[str, Any]] = queue.Queue()
        self.ended = False
        path, _, query = path.partition("?")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": [(name.lower().encode(), value.encode()) for name, value in headers.items()],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
        }
        self.task = server.run(self._start(scope))

    async def _start(self, scope: dict[str, Any]) -> "asyncio.Task[None]":
        self._hung_up = asyncio.Event()
        self._reading = asyncio.Event()
        self._reading.set()
        self._body_sent = False
        return asyncio.ensure_future(asgi.application(scope, self._receive, self._send))

    async def _receive(self) -> dict[str, Any]:
        if not self._body_sent:
            self._body_sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self._hung_up.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: dict[str, Any]) -> None:
        await self._reading.wait()
        self.sent.put(message)

    def _next(self, timeout: float) -> dict[str, Any]:
        try:
            return self.sent.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"nothing sent within {timeout} s") from None

    def start(self) -> tuple[int, dict[str, str]]:
        message = self._next(TIMEOUT)
        assert message["type"] == "http.response.start", message
        headers = {name.decode().lower(): value.decode() for name, value in message["headers"]}
        return message["status"], headers

    def chunk(self, timeout: float = TIMEOUT) -> bytes:
        """The next part of the body; `ended` once the application closed it."""
        message = self._next(timeout)
        assert message["type"] == "http.response.body", message
        self.ended = not message.get("more_body", False)
        return message.get("body", b"")

    def event(self, timeout: float = TIMEOUT, *, past_pings: bool = False) -> dict[str, Any]:
        """The next SSE message, which must be an unnamed `data:` line;
        `past_pings`: heartbeats before it are passed over (a test with a
        short heartbeat on a slow machine may see one first)."""
        chunk = self.chunk(timeout)
        while past_pings and chunk == PING:
            chunk = self.chunk(timeout)
        assert chunk.startswith(b"data: ") and chunk.endswith(b"\n\n"), chunk
        assert chunk.count(b"\n") == 2, chunk
        return json.loads(chunk[len(b"data: ") : -2])

    def answer(self) -> Answer:
        status, headers = self.start()
        content = b""
        while not self.ended:
            content += self.chunk()
        return Answer(status, headers, content)

    def stop_reading(self) -> None:
        self.server.call(self._reading.clear)

    def read_again(self) -> None:
        self.server.call(self._reading.set)

    def hang_up(self) -> None:
        self.server.call(self._hung_up.set)
        self.server.run(asyncio.wait_for(asyncio.shield(self.task), TIMEOUT))


@dataclass
class Chat:
    bot: Bot
    connection: ChatConnection
    owner: User
    guest: User
    conversation: Conversation

    @property
    def base(self) -> str:
        return f"/chat/{self.connection.webhook_id}"

    def listen_path(self, conversation_chat_id: str | None = None) -> str:
        chat_id = conversation_chat_id or self.conversation.chat_id
        return f"{self.base}/conversations/{chat_id}/listen"

    def key(self, user: User) -> str:
        return user_key(self.connection, user)

    @property
    def channel(self) -> str:
        return conversation_channel(self.conversation.id)

    def client(self, user: User) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_X_USER_KEY=self.key(user))
        return client


@pytest.fixture
def chat(bot: Bot) -> Chat:
    """A conversation whose chat id holds a `/`, its owner and a guest."""
    connection = ChatConnectionFactory(bot=bot)
    owner = UserFactory(bot=bot, chat_id="alice")
    guest = UserFactory(bot=bot, chat_id="bob")
    conversation = ConversationFactory(bot=bot, chat_id="team/support-1", owner=owner)
    ParticipantFactory(conversation=conversation, user=owner)
    ParticipantFactory(conversation=conversation, user=guest)
    return Chat(bot, connection, owner, guest, conversation)


def listen(server: ServerLoop, chat: Chat, user: User, **headers: str) -> Exchange:
    """A listener of the conversation, past its first bytes (a ping)."""
    exchange = Exchange(
        server, chat.listen_path(), headers={"x-user-key": chat.key(user), **headers}
    )
    status, _ = exchange.start()
    assert status == 200
    assert exchange.chunk() == PING
    return exchange


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not met within {TIMEOUT} s: {what}")
        time.sleep(0.01)


# --- refusals: the one error body, in the order of the other chat routes -----


def test_an_unknown_webhook_is_404_whatever_the_method_and_key(server, chat):
    for method in ("GET", "POST"):
        answer = Exchange(
            server,
            f"/chat/no-such-webhook/conversations/{chat.conversation.chat_id}/listen",
            method=method,
            headers={"x-user-key": chat.key(chat.owner)},
        ).answer()
        assert_error(answer, 404, "ResourceNotFound")


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "HEAD"])
def test_a_method_other_than_get_is_405_before_the_key_is_read(server, chat, method):
    answer = Exchange(server, chat.listen_path(), method=method, headers={}).answer()
    if method != "HEAD":  # a server drops the body of a HEAD answer
        assert_error(answer, 405, "MethodNotFound")
    assert answer.status_code == 405
    assert answer.headers["allow"] == "GET"


def test_a_missing_key_is_401_with_a_challenge(server, chat):
    answer = Exchange(server, chat.listen_path(), headers={}).answer()
    assert_error(answer, 401, "Unauthorized")
    assert answer.headers["www-authenticate"] == 'UserKey header="x-user-key"'


def test_keys_that_do_not_name_a_user_of_this_chat_are_401(server, chat):
    other_connection = ChatConnectionFactory(bot=BotFactory())
    gone = UserFactory(bot=chat.bot, chat_id="carol")
    gone_key = chat.key(gone)
    gone.delete()
    secret = chat.connection.encryption_key
    expired = jwt.encode(
        {"id": chat.owner.chat_id, "exp": datetime.now(UTC) - timedelta(minutes=1)},
        secret,
        algorithm="HS256",
    )
    keys = {
        "malformed": "not-a-jwt",
        "expired": expired,
        "wrong signature": jwt.encode({"id": chat.owner.chat_id}, "x" * 32, algorithm="HS256"),
        "of another connection": user_key(other_connection, chat.owner),
        "of a deleted user": gone_key,
        "naming no valid id": jwt.encode({"id": "bad id!"}, secret, algorithm="HS256"),
        "empty": "",
    }
    for reason, key in keys.items():
        answer = Exchange(server, chat.listen_path(), headers={"x-user-key": key}).answer()
        assert_error(answer, 401, "Unauthorized")
        assert answer.headers["www-authenticate"] == 'UserKey header="x-user-key"', reason


def test_a_path_that_cannot_be_a_conversation_id_is_400(server, chat):
    for bad in ("not.an.id", "x" * 71):
        answer = Exchange(
            server, chat.listen_path(bad), headers={"x-user-key": chat.key(chat.owner)}
        ).answer()
        assert_error(answer, 400, "InvalidIdentifier")


def test_an_unknown_conversation_or_one_of_another_bot_is_404(server, chat):
    elsewhere = ConversationFactory(bot=BotFactory(), chat_id="elsewhere")
    for chat_id in ("team/nothing-here", elsewhere.chat_id):
        answer = Exchange(
            server, chat.listen_path(chat_id), headers={"x-user-key": chat.key(chat.owner)}
        ).answer()
        assert_error(answer, 404, "ResourceNotFound")


def test_a_user_who_is_not_a_participant_is_403(server, chat):
    stranger = UserFactory(bot=chat.bot, chat_id="mallory")
    answer = Exchange(
        server, chat.listen_path(), headers={"x-user-key": chat.key(stranger)}
    ).answer()
    body = assert_error(answer, 403, "Forbidden")
    assert chat.conversation.chat_id in body["message"]
    assert live_bus().listener_count(chat.channel) == 0


def test_a_wsgi_server_gets_a_clear_error_not_an_endless_wait(chat):
    response = chat.client(chat.owner).get(chat.listen_path())
    body = assert_error(response, 500, "Internal")
    assert "ASGI" in body["message"]


# --- the stream --------------------------------------------------------------


def test_the_stream_opens_with_its_headers_and_a_ping(server, chat):
    exchange = Exchange(
        server,
        chat.listen_path(),
        headers={"x-user-key": chat.key(chat.guest), "origin": "https://widget.example"},
    )
    status, headers = exchange.start()
    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    assert headers["cache-control"] == "no-cache"
    assert headers["x-accel-buffering"] == "no"
    assert headers["access-control-allow-origin"] == "*"
    assert "content-length" not in headers
    assert exchange.chunk() == b'data: {"type":"ping","data":{}}\n\n'
    assert live_bus().listener_count(chat.channel) == 1
    exchange.hang_up()


def test_browsers_may_listen_from_another_origin(chat):
    response = APIClient().options(
        chat.listen_path(),
        HTTP_ORIGIN="https://widget.example",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="GET",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="x-user-key",
    )
    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == "*"
    assert "x-user-key" in response["Access-Control-Allow-Headers"]


def test_a_message_posted_reaches_every_listener_as_an_unnamed_data_message(server, chat):
    owner = listen(server, chat, chat.owner)
    guest = listen(server, chat, chat.guest)
    posted = chat.client(chat.owner).post(
        f"{chat.base}/messages",
        {
            "conversationId": chat.conversation.chat_id,
            "payload": {"type": "text", "text": "hello"},
            "metadata": {"source": "test"},
        },
        format="json",
    )
    assert posted.status_code == 201, posted.content
    message = posted.json()["message"]
    expected = {"type": "message_created", "data": {**message, "isBot": False}}
    assert owner.event() == expected
    assert guest.event() == expected
    assert message["conversationId"] == "team/support-1"  # chat ids
    owner.hang_up()
    guest.hang_up()


def test_a_ping_follows_each_silent_interval(server, chat, settings):
    settings.LIVE_STREAM_HEARTBEAT = 0.05
    exchange = listen(server, chat, chat.owner)
    started = time.monotonic()
    assert exchange.chunk(timeout=1) == PING
    assert exchange.chunk(timeout=1) == PING
    assert time.monotonic() - started < 1
    exchange.hang_up()


def test_hanging_up_unsubscribes(server, chat):
    exchanges = [listen(server, chat, chat.owner) for _ in range(3)]
    assert live_bus().listener_count(chat.channel) == 3
    for left, exchange in enumerate(reversed(exchanges)):
        exchange.hang_up()
        assert live_bus().listener_count(chat.channel) == 2 - left


def test_listeners_share_a_few_threads_rather_than_one_each(server, chat):
    exchanges = [listen(server, chat, chat.guest) for _ in range(3 * asgi.LISTENER_THREADS)]
    names = [thread.name for thread in threading.enumerate()]
    assert sum(name.startswith("listener") for name in names) <= asgi.LISTENER_THREADS
    for exchange in exchanges:
        exchange.hang_up()


def test_the_stream_of_a_removed_participant_ends_after_telling_them(server, chat, settings):
    settings.LIVE_STREAM_HEARTBEAT = 0.2
    owner = listen(server, chat, chat.owner)
    guest = listen(server, chat, chat.guest)
    removed = chat.client(chat.owner).delete(
        f"{chat.base}/conversations/{chat.conversation.chat_id}/participants/bob"
    )
    assert removed.status_code == 200, removed.content
    told = {
        "type": "participant_removed",
        "data": {"conversationId": "team/support-1", "participantId": "bob"},
    }
    assert guest.event(past_pings=True) == told
    assert guest.chunk() == b"" and guest.ended
    assert owner.event(past_pings=True) == told
    assert owner.chunk(timeout=1) == PING  # the owner's stream goes on
    wait_for(lambda: live_bus().listener_count(chat.channel) == 1, "one listener left")
    owner.hang_up()


def test_deleting_the_conversation_ends_every_stream(server, chat):
    listeners = {"alice": listen(server, chat, chat.owner), "bob": listen(server, chat, chat.guest)}
    deleted = chat.client(chat.owner).delete(
        f"{chat.base}/conversations/{chat.conversation.chat_id}"
    )
    assert deleted.status_code == 200, deleted.content
    for participant_id, exchange in listeners.items():
        removals = []
        while not exchange.ended:
            chunk = exchange.chunk()
            if chunk:
                removals.append(json.loads(chunk[len(b"data: ") :]))
        assert removals[-1]["data"]["participantId"] == participant_id
        assert {event["type"] for event in removals} == {"participant_removed"}
    wait_for(lambda: live_bus().listener_count(chat.channel) == 0, "no listener left")


def test_a_listener_that_falls_behind_is_dropped_and_the_others_go_on(server, chat, settings):
    settings.LIVE_STREAM_QUEUE_SIZE = 4
    fast = listen(server, chat, chat.owner)
    slow = listen(server, chat, chat.guest)
    slow.stop_reading()
    for n in range(20):
        message = {"type": "event_created", "data": {"n": n}}
        live_bus().publish(chat.channel, json.dumps(message))
        assert fast.event() == message  # keeps up
    # Dropped from the bus at once, while its client still does not read.
    wait_for(lambda: live_bus().listener_count(chat.channel) == 1, "the slow one dropped")
    slow.read_again()
    assert slow.event() == {"type": "event_created", "data": {"n": 0}}  # it was sending that
    assert slow.chunk() == b"" and slow.ended
    fast.hang_up()


# --- the bus and publishing ----------------------------------------------------


def test_publishing_waits_for_the_commit_and_sends_nothing_when_rolled_back(server, chat):
    subscription = server.run(live_bus().subscribe(chat.channel).open())
    data = {"id": "msg_1", "conversationId": "team/support-1", "userId": "alice"}
    with pytest.raises(RuntimeError), transaction.atomic():
        stream_publish(conversation_id=chat.conversation.id, type="message_deleted", data=data)
        raise RuntimeError("rolled back")
    with transaction.atomic():
        stream_publish(conversation_id=chat.conversation.id, type="message_deleted", data=data)
        with pytest.raises(TimeoutError):
            server.run(asyncio.wait_for(subscription.get(), 0.2))  # not before the commit
    assert json.loads(server.run(subscription.get())) == {"type": "message_deleted", "data": data}
    with pytest.raises(TimeoutError):
        server.run(asyncio.wait_for(subscription.get(), 0.2))  # once
    subscription.close()


def test_a_subscription_dropped_without_closing_lets_go(server, chat):
    subscription: Subscription | None = server.run(live_bus().subscribe(chat.channel).open())
    assert live_bus().listener_count(chat.channel) == 1
    del subscription
    gc.collect()
    assert live_bus().listener_count(chat.channel) == 0


def test_a_subscription_is_an_async_context_manager(server, chat):
    async def hear_one() -> str:
        async with live_bus().subscribe(chat.channel) as subscription:
            live_bus().publish(chat.channel, "hello")
            return await subscription.get()

    assert server.run(hear_one()) == "hello"
    assert live_bus().listener_count(chat.channel) == 0


def test_an_inbox_that_overflows_drops_its_listener_for_good(server):
    async def overflow() -> list[bool]:
        inbox = Inbox(capacity=2, loop=asyncio.get_running_loop())
        accepted = [inbox.offer(str(n)) for n in range(4)]
        with pytest.raises(ListenerDropped):
            await inbox.get()
        return accepted

    assert server.run(overflow()) == [True, True, False, False]


@pytest.mark.parametrize(
    ("message", "ends"),
    [
        ('{"type":"participant_removed","data":{"participantId":"bob"}}', True),
        ('{"type":"participant_removed","data":{"participantId":"eve"}}', False),
        ('{"type":"message_created","data":{"payload":{"text":"participant_removed bob"}}}', False),
        ('{"type":"participant_removed","data":"bob"}', False),
        ('["participant_removed","bob"]', False),
        ("participant_removed bob", False),
    ],
)
def test_only_the_removal_of_the_listener_itself_ends_its_stream(message, ends):
    assert removes_listener(message, "bob") is ends
