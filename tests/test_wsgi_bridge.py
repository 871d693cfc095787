"""The WSGI bridge (platform_site/server/wsgi_bridge.py) and the routing in front of
it (platform_site/asgi.py): platform_site.asgi.application called in-process
as a server calls it, with the body handed over in messages, counting how
many of them the application asks for.

Tests that reach a view commit (transaction=True): the bridge runs the view
on a thread of its own, on that thread's database connection."""

import asyncio
import io
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings as django_settings

from bots.models import AuditRecord, Bot, Role
from events.models import Event
from platform_site import asgi
from platform_site.server.wsgi_bridge import _environ
from tests.conftest import Answer, assert_error
from tests.factories import (
    ChatConnectionFactory,
    ConversationFactory,
    EventFactory,
    ParticipantFactory,
    UserFactory,
    member_token,
    user_key,
)

EVENTS = "/v1/chat/events"
ONE_MB = 1024 * 1024
CLIENT = ("203.0.113.7", 51234)

Application = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


def http_scope(
    method: str,
    path: str,
    *,
    headers: Iterable[tuple[str, str]] = (),
    query_string: bytes = b"",
    client: tuple[str, int] = CLIENT,
    root_path: str = "",
) -> dict[str, Any]:
    """The scope uvicorn makes: `path` percent-decoded, `raw_path` as sent."""
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": quote(path).encode("ascii"),
        "query_string": query_string,
        "root_path": root_path,
        "headers": [(name.lower().encode(), value.encode()) for name, value in headers],
        "client": client,
        "server": ("testserver", 8000),
    }


@dataclass
class Exchange:
    """One request as a server makes it. The body comes in `parts`; `taken`
    counts the parts the application asked for. The client hangs up once the
    answer is complete, or right after the last part when `hang_up_mid_body`
    (the server saw no end of the body)."""

    scope: dict[str, Any]
    parts: list[bytes]
    hang_up_mid_body: bool = False
    taken: int = 0
    sent: list[Mapping[str, Any]] = field(default_factory=list)

    async def run(self, application: Application) -> None:
        answered = asyncio.Event()
        waiting = list(self.parts)

        async def receive() -> dict[str, Any]:
            if waiting:
                part = waiting.pop(0)
                self.taken += 1
                more = bool(waiting) or self.hang_up_mid_body
                return {"type": "http.request", "body": part, "more_body": more}
            if not self.hang_up_mid_body:
                await answered.wait()
            return {"type": "http.disconnect"}

        async def send(message: Mapping[str, Any]) -> None:
            self.sent.append(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered.set()

        await application(self.scope, receive, send)

    def answer(self) -> Answer:
        assert self.sent, "no answer was started"
        start, *bodies = self.sent
        assert start["type"] == "http.response.start", start
        assert bodies and not bodies[-1].get("more_body", False), "the answer is not complete"
        headers = {name.decode().lower(): value.decode() for name, value in start["headers"]}
        return Answer(start["status"], headers, b"".join(b.get("body", b"") for b in bodies))


def exchange(
    method: str,
    path: str,
    *,
    headers: Iterable[tuple[str, str]] = (),
    parts: Iterable[bytes] = (b"",),
    query_string: bytes = b"",
    client: tuple[str, int] = CLIENT,
    root_path: str = "",
    hang_up_mid_body: bool = False,
    application: Application = asgi.application,
) -> Exchange:
    """Run one request through the application (platform_site.asgi's by default) to its end."""
    scope = http_scope(
        method,
        path,
        headers=headers,
        query_string=query_string,
        client=client,
        root_path=root_path,
    )
    done = Exchange(scope, list(parts), hang_up_mid_body)
    asyncio.run(asyncio.wait_for(done.run(application), timeout=30))
    return done


def runtime_headers(bot: Bot) -> list[tuple[str, str]]:
    return [
        ("authorization", f"Bearer {member_token(bot.workspace, Role.DEVELOPER)}"),
        ("x-bot-id", bot.id),
        ("content-type", "application/json"),
    ]


def with_length(headers: list[tuple[str, str]], body: bytes) -> list[tuple[str, str]]:
    return [*headers, ("content-length", str(len(body)))]


EVENT = json.dumps({"type": "order.created", "payload": {"n": 1}}).encode()


# --- the whole request reaches the view ----------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_an_event_posted_through_the_bridge_is_created_and_stored(bot):
    done = exchange("POST", EVENTS, headers=with_length(runtime_headers(bot), EVENT), parts=[EVENT])
    answer = done.answer()
    assert answer.status_code == 201, answer.content
    assert answer.headers["content-type"] == "application/json"
    assert int(answer.headers["content-length"]) == len(answer.content)
    event = answer.json()["event"]
    stored = Event.objects.get()
    assert (stored.id, stored.bot_id, stored.type, stored.payload) == (
        event["id"],
        bot.id,
        "order.created",
        {"n": 1},
    )


@pytest.mark.django_db(transaction=True)
def test_a_body_in_many_parts_is_read_whole(bot):
    body = json.dumps({"type": "t", "payload": {"pad": "é" * 5000}}).encode()
    parts = [body[i : i + 1000] for i in range(0, len(body), 1000)]
    done = exchange("POST", EVENTS, headers=with_length(runtime_headers(bot), body), parts=parts)
    assert done.answer().status_code == 201, done.answer().content
    assert done.taken == len(parts)
    assert Event.objects.get().payload == {"pad": "é" * 5000}


@pytest.mark.django_db(transaction=True)
def test_the_query_string_reaches_the_view_decoded(bot):
    EventFactory(bot=bot, type="café.ordered")
    EventFactory(bot=bot, type="tea.ordered")
    done = exchange(
        "GET",
        EVENTS,
        headers=runtime_headers(bot),
        query_string=b"type=caf%C3%A9.ordered&pageSize=5",
    )
    answer = done.answer()
    assert answer.status_code == 200, answer.content
    assert [e["type"] for e in answer.json()["events"]] == ["café.ordered"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("chat_id", ["a/b", "x/y/z-1_2"])
def test_a_percent_encoded_path_segment_reaches_the_view(bot, chat_id):
    # Chat ids may hold "/" (sent as %2F, decoded by the server) but only
    # ASCII: a non-ASCII one is refused by the view, naming the id it got.
    connection = ChatConnectionFactory(bot=bot)
    alice = UserFactory(bot=bot, chat_id="alice")
    conversation = ConversationFactory(bot=bot, chat_id=chat_id, owner=alice)
    ParticipantFactory(conversation=conversation, user=alice)
    key = [("x-user-key", user_key(connection, alice))]
    base = f"/chat/{connection.webhook_id}/conversations/"

    found = exchange("GET", base + chat_id, headers=key).answer()
    assert found.status_code == 200, found.content
    assert found.json()["conversation"]["id"] == chat_id

    missing = exchange("GET", base + chat_id + "-2", headers=key).answer()
    body = assert_error(missing, 404, "ResourceNotFound")
    assert body["message"] == f"Conversation {chat_id + '-2'!r} not found"

    unicode = exchange("GET", base + chat_id + "-ß✓", headers=key).answer()
    body = assert_error(unicode, 400, "InvalidIdentifier")
    assert body["message"] == f"{chat_id + '-ß✓'!r} is not a conversation id"


@pytest.mark.django_db(transaction=True)
def test_an_unknown_non_ascii_path_is_named_in_the_404():
    body = assert_error(exchange("GET", "/v1/nowhere/ça va").answer(), 404, "ResourceNotFound")
    assert body["message"] == "No route matches /v1/nowhere/ça va"


@pytest.mark.django_db(transaction=True)
def test_repeated_headers_reach_the_view_joined_by_commas(bot):
    headers = [
        *with_length(runtime_headers(bot), EVENT),
        ("x-integration-alias", "first"),
        ("x-integration-alias", "second"),
    ]
    body = assert_error(
        exchange("POST", EVENTS, headers=headers, parts=[EVENT]).answer(),
        400,
        "ReferenceNotFound",
    )
    assert "x-integration-alias 'first,second'" in body["message"]
    assert not Event.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_client_address_of_the_scope_is_remote_addr(workspace):
    headers = [
        ("authorization", f"Bearer {member_token(workspace, Role.DEVELOPER)}"),
        ("x-workspace-id", workspace.id),
        ("content-type", "application/json"),
    ]
    body = b'{"name": "Bridged"}'
    done = exchange("POST", "/v1/admin/bots", headers=with_length(headers, body), parts=[body])
    assert done.answer().status_code == 201, done.answer().content
    record = AuditRecord.objects.get(target_type="bot")
    assert record.client_ip == CLIENT[0]


@pytest.mark.django_db(transaction=True)
def test_a_root_path_is_the_script_name_and_not_part_of_the_route():
    # uvicorn --root-path /api: the scope's path starts with the root path
    # (ASGI spec), as Django's own ASGI handler expects.
    done = exchange("GET", "/api/healthz", root_path="/api")
    assert done.answer().status_code == 200, done.answer().content


def test_the_environ_is_the_one_a_wsgi_server_builds():
    scope = http_scope(
        "POST",
        "/api/v1/ça",
        headers=[
            ("content-type", "application/json"),
            ("content-length", "2"),
            ("accept", "text/html"),
            ("accept", "application/json"),
            ("x-forwarded-for", "198.51.100.1"),
        ],
        query_string=b"a=1&b=%C3%A9",
        root_path="/api",
    )
    environ = _environ(scope, b"{}")
    assert environ["REQUEST_METHOD"] == "POST"
    assert environ["SCRIPT_NAME"] == "/api"
    assert environ["PATH_INFO"].encode("latin-1").decode("utf-8").endswith("/v1/ça")
    assert environ["QUERY_STRING"] == "a=1&b=%C3%A9"
    assert environ["CONTENT_TYPE"] == "application/json"
    assert environ["CONTENT_LENGTH"] == "2"
    assert "HTTP_CONTENT_TYPE" not in environ and "HTTP_CONTENT_LENGTH" not in environ
    assert environ["HTTP_ACCEPT"] == "text/html,application/json"
    # Forwarded headers are passed on as headers, never as the peer's address.
    assert environ["HTTP_X_FORWARDED_FOR"] == "198.51.100.1"
    assert (environ["REMOTE_ADDR"], environ["REMOTE_PORT"]) == ("203.0.113.7", "51234")
    assert (environ["SERVER_NAME"], environ["SERVER_PORT"]) == ("testserver", "8000")
    assert environ["SERVER_PROTOCOL"] == "HTTP/1.1"
    assert environ["wsgi.url_scheme"] == "http"
    assert isinstance(environ["wsgi.input"], io.BytesIO)
    assert environ["wsgi.input"].read() == b"{}"


# --- refused bodies ----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_body_longer_than_its_content_length_is_400_and_stores_nothing(bot):
    # The announced bytes alone are a valid event: a bridge that cut the body
    # there instead of refusing it would store one.
    body = EVENT + b' {"type": "smuggled", "payload": {}}'
    headers = [*runtime_headers(bot), ("content-length", str(len(EVENT)))]
    done = exchange("POST", EVENTS, headers=headers, parts=[EVENT[:10], body[10:]])
    error = assert_error(done.answer(), 400, "InvalidPayload")
    assert "longer than its Content-Length" in error["message"]
    assert done.taken == 2
    assert not Event.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_body_over_one_megabyte_is_413_without_being_read(bot):
    headers = [*runtime_headers(bot), ("content-length", str(ONE_MB + 1))]
    done = exchange("POST", EVENTS, headers=headers, parts=[b"x" * 1024] * 8)
    error = assert_error(done.answer(), 413, "PayloadTooLarge")
    assert str(ONE_MB) in error["message"]
    assert done.taken == 0
    assert not Event.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_bridge_itself_refuses_a_body_over_the_limit_without_reading_it(bot, settings):
    # Under BRIDGE_BODY_LIMIT, so bridged; over the (lowered) runtime limit.
    settings.RUNTIME_BODY_LIMIT = 100
    body = json.dumps({"type": "t", "payload": {"pad": "x" * 200}}).encode()
    scope = http_scope("POST", EVENTS, headers=with_length(runtime_headers(bot), body))
    assert asgi._bridged(scope)
    done = exchange("POST", EVENTS, headers=with_length(runtime_headers(bot), body), parts=[body])
    error = assert_error(done.answer(), 413, "PayloadTooLarge")
    assert "100 bytes" in error["message"]
    assert done.taken == 0
    assert not Event.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_chunked_body_is_411_without_being_read(bot):
    headers = [*runtime_headers(bot), ("transfer-encoding", "chunked")]
    done = exchange("POST", EVENTS, headers=headers, parts=[EVENT])
    error = assert_error(done.answer(), 411, "InvalidPayload")
    assert "Chunked" in error["message"]
    assert done.taken == 0
    assert not Event.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_client_gone_before_its_body_ends_gets_no_answer_and_stores_nothing(bot):
    done = exchange(
        "POST",
        EVENTS,
        headers=with_length(runtime_headers(bot), EVENT),
        parts=[EVENT[:10]],
        hang_up_mid_body=True,
    )
    assert done.sent == []
    assert done.taken == 1
    assert not Event.objects.exists()


# --- which requests go through the bridge ---------------------------------------------


@pytest.mark.parametrize(
    ("path", "headers", "bridged"),
    [
        ("/v1/chat/events", [], True),
        ("/v1/chat/events", [("content-length", "25")], True),
        ("/v1/admin/bots", [("content-length", str(ONE_MB))], True),
        ("/v1/admin/bots", [("content-length", str(ONE_MB + 1))], False),
        ("/v1/chat/events", [("content-length", str(200 * ONE_MB))], False),
        # Not a number: the bridge refuses it from its headers, unread.
        ("/v1/chat/events", [("content-length", "lots")], True),
        ("/v1/chat/events", [("content-length", "5"), ("content-length", "5")], True),
        ("/chat/whk_x/conversations/a/b/listen", [], False),
        ("/chat/whk_x/conversations/a/b/messages", [], True),
        ("/chat/whk_x/hello", [], True),
        ("/healthz", [], True),
    ],
)
def test_the_routing_of_a_request(path, headers, bridged):
    assert asgi._bridged(http_scope("GET", path, headers=headers)) is bridged


def test_uploads_and_downloads_are_not_bridged():
    upload = django_settings.FILE_UPLOAD_PATH + "file_x/abc"
    download = django_settings.FILE_DOWNLOAD_PATH + "file_x/abc"
    assert not asgi._bridged(http_scope("PUT", upload, headers=[("content-length", "10")]))
    assert not asgi._bridged(http_scope("GET", download))
