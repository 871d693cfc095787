"""Body limits under ASGI: platform_site.asgi.application called in-process as
a server calls it, with the body handed over in messages, counting how many
of them the application takes. Django's handler reads the whole body before
any middleware runs, so the limit must be applied before it does.

Tests that reach a view commit (transaction=True): under ASGI the view runs
in a thread of its own, on its own database connection."""

import asyncio
import logging
import socket
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bots.models import Bot, Role
from events.models import Event
from files.models import File, FileStatus
from files.signed_urls import upload_url
from platform_site import asgi
from tests.conftest import Answer, assert_error
from tests.factories import FileFactory, member_token
from tests.servers import READ_TIMEOUT, celery_queue, servers  # noqa: F401

EVENTS = "/v1/chat/events"
ONE_MB = 1024 * 1024
PART = 64 * 1024


@dataclass
class Exchange:
    """One request as a server makes it. The body comes in `parts`; `taken`
    counts the parts the application asked for. The client hangs up once the
    answer is complete, or after `hang_up_after` parts of the answer's body."""

    method: str
    path: str
    headers: dict[str, str]
    parts: Iterator[bytes]
    hang_up_after: int | None = None
    taken: int = 0
    status: int = 0
    response_headers: dict[str, str] = field(default_factory=dict)
    body: list[bytes] = field(default_factory=list)
    complete: bool = False

    def scope(self) -> dict[str, Any]:
        return {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": self.method,
            "scheme": "http",
            "path": self.path,
            "raw_path": self.path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (name.lower().encode(), value.encode()) for name, value in self.headers.items()
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
        }

    async def run(self) -> None:
        hung_up = asyncio.Event()
        next_part = next(self.parts, None)

        async def receive() -> dict[str, Any]:
            nonlocal next_part
            if next_part is None:
                # The body is over: what comes next is the client hanging up.
                await hung_up.wait()
                return {"type": "http.disconnect"}
            part, next_part = next_part, next(self.parts, None)
            self.taken += 1
            return {"type": "http.request", "body": part, "more_body": next_part is not None}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self.status = message["status"]
                self.response_headers = {
                    name.decode().lower(): value.decode() for name, value in message["headers"]
                }
                return
            if message.get("body"):
                self.body.append(message["body"])
            if not message.get("more_body", False):
                self.complete = True
                hung_up.set()
            elif self.hang_up_after is not None and len(self.body) >= self.hang_up_after:
                hung_up.set()
                # A server whose client is gone waits on a send that never ends.
                await asyncio.Event().wait()

        await asgi.application(self.scope(), receive, send)

    def answer(self) -> Answer:
        assert self.status, "no answer was started"
        return Answer(self.status, self.response_headers, b"".join(self.body))


def exchange(
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    parts: Iterable[bytes] = (b"",),
    hang_up_after: int | None = None,
) -> Exchange:
    """Run one request through the ASGI application to its end."""
    done = Exchange(method, path, headers or {}, iter(parts), hang_up_after)
    asyncio.run(asyncio.wait_for(done.run(), timeout=30))
    return done


def in_parts(data: bytes, size: int = PART) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def oversize_parts() -> Iterator[bytes]:
    """4 MB, over every limit but the admin's: only a cut stops it being read
    whole. (Bounded: a guard that lets a body through must fail the test, not
    fill the disk with Django's temporary file.)"""
    for _ in range(4 * ONE_MB // PART):
        yield b"x" * PART


def event_body(size: int) -> bytes:
    head, tail = b'{"type":"t","payload":{"pad":"', b'"}}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


def peak_memory(pid: int) -> int:
    """The most memory the process has held at once so far, in bytes (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


def runtime_headers(bot: Bot) -> dict[str, str]:
    return {
        "authorization": f"Bearer {member_token(bot.workspace, Role.DEVELOPER)}",
        "x-bot-id": bot.id,
        "content-type": "application/json",
    }


# --- refused from the headers: the body is not read at all ---------------------------


def test_an_announced_body_over_one_megabyte_is_413_without_a_byte_read():
    done = exchange(
        "POST",
        EVENTS,
        headers={"content-length": str(200 * ONE_MB), "content-type": "application/json"},
        parts=oversize_parts(),
    )
    body = assert_error(done.answer(), 413, "PayloadTooLarge")
    assert str(ONE_MB) in body["message"]
    assert done.taken == 0


def test_a_refusal_on_a_chat_route_carries_the_cors_headers():
    done = exchange(
        "POST",
        "/chat/whk_any/messages",
        headers={
            "origin": "https://widget.example",
            "content-length": str(2 * ONE_MB),
            "content-type": "application/json",
        },
        parts=oversize_parts(),
    )
    assert_error(done.answer(), 413, "PayloadTooLarge")
    assert done.answer().headers["access-control-allow-origin"] == "*"
    assert done.taken == 0


def test_a_refusal_is_logged_with_its_error_id(caplog):
    with caplog.at_level(logging.INFO, logger="platform_site.errors"):
        done = exchange("POST", EVENTS, headers={"content-length": str(2 * ONE_MB)})
    error_id = assert_error(done.answer(), 413, "PayloadTooLarge")["id"]
    assert any(error_id in record.getMessage() for record in caplog.records)


def test_a_chunked_body_is_411_without_a_byte_read():
    done = exchange(
        "POST",
        EVENTS,
        headers={"transfer-encoding": "chunked", "content-type": "application/json"},
        parts=oversize_parts(),
    )
    body = assert_error(done.answer(), 411, "InvalidPayload")
    assert "Content-Length" in body["message"]
    assert done.taken == 0


@pytest.mark.parametrize("length", ["lots", "-1", "1,2"])
def test_a_content_length_that_is_not_a_number_is_400(length):
    done = exchange("POST", EVENTS, headers={"content-length": length}, parts=oversize_parts())
    assert_error(done.answer(), 400, "InvalidPayload")
    assert done.taken == 0


def test_the_admin_api_takes_up_to_fifty_megabytes():
    # Over the runtime limit, within the admin one: read whole, and answered
    # by the view.
    data = b"{}" + b" " * (2 * ONE_MB - 2)
    done = exchange(
        "POST",
        "/v1/admin/bots",
        headers={"content-length": str(len(data)), "content-type": "application/json"},
        parts=in_parts(data),
    )
    assert done.answer().status_code != 413
    assert done.taken == 2 * ONE_MB // PART


# --- held to its announced length as it comes ------------------------------------------


def test_a_body_without_a_length_is_411_at_its_first_part():
    # HTTP/2 allows it; the views read Content-Length bytes, so they would
    # take it for an empty body.
    done = exchange(
        "POST", EVENTS, headers={"content-type": "application/json"}, parts=oversize_parts()
    )
    body = assert_error(done.answer(), 411, "InvalidPayload")
    assert "Content-Length" in body["message"]
    assert done.taken == 1


def test_a_body_longer_than_its_content_length_is_cut_where_it_runs_past():
    done = exchange(
        "POST",
        EVENTS,
        headers={"content-length": str(3 * PART), "content-type": "application/json"},
        parts=oversize_parts(),
    )
    body = assert_error(done.answer(), 400, "InvalidPayload")
    assert "longer than its Content-Length" in body["message"]
    assert done.taken == 4


@pytest.mark.django_db(transaction=True)
def test_a_body_within_the_limit_reaches_the_view_whole(bot):
    data = event_body(ONE_MB)
    headers = {**runtime_headers(bot), "content-length": str(len(data))}
    done = exchange("POST", EVENTS, headers=headers, parts=in_parts(data))
    assert done.answer().status_code == 201, done.answer().content[:300]
    assert Event.objects.get().payload["pad"] == "x" * (ONE_MB - len(event_body(0)))


# --- the upload URL: its own limit -----------------------------------------------------


@pytest.fixture
def pending_file(bot: Bot) -> File:
    return FileFactory(
        bot=bot,
        key="big.bin",
        size=3 * ONE_MB,
        content_type="application/octet-stream",
        status=FileStatus.UPLOAD_PENDING,
    )


@pytest.mark.django_db(transaction=True)
def test_an_upload_over_one_megabyte_is_stored(pending_file, file_storage):
    # Over Django's FILE_UPLOAD_MAX_MEMORY_SIZE (2.5 MB) too: the body waits
    # in a temporary file on disk, not in memory.
    data = bytes(range(256)) * (3 * ONE_MB // 256)
    done = exchange(
        "PUT",
        "/" + upload_url(pending_file).split("/", 3)[3],
        headers={"content-length": str(len(data)), "content-type": "application/octet-stream"},
        parts=in_parts(data),
    )
    assert done.answer().status_code == 200, done.answer().content
    pending_file.refresh_from_db()
    assert pending_file.status == FileStatus.UPLOAD_COMPLETED
    assert (file_storage / pending_file.storage_name).read_bytes() == data


@pytest.mark.django_db(transaction=True)
def test_an_upload_over_its_maximum_is_413_without_a_byte_read(
    pending_file, file_storage, settings
):
    settings.FILE_UPLOAD_MAX_SIZE = 2 * ONE_MB
    done = exchange(
        "PUT",
        "/" + upload_url(pending_file).split("/", 3)[3],
        headers={
            "content-length": str(3 * ONE_MB),
            "content-type": "application/octet-stream",
        },
        parts=oversize_parts(),
    )
    assert_error(done.answer(), 413, "PayloadTooLarge")
    assert done.taken == 0
    pending_file.refresh_from_db()
    assert pending_file.status == FileStatus.UPLOAD_PENDING


# --- a real server -----------------------------------------------------------------------


def read_answer(reader: Any) -> Answer:
    """One HTTP/1.1 answer, read off the connection."""
    status = int(reader.readline().split()[1])
    headers: dict[str, str] = {}
    while (line := reader.readline()) != b"\r\n":
        name, value = line.decode("latin1").split(":", 1)
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        return Answer(status, headers, reader.read(int(headers["content-length"])))
    assert headers["transfer-encoding"] == "chunked", headers
    content = b""
    while size := int(reader.readline(), 16):
        content += reader.read(size)
        reader.readline()
    reader.readline()
    return Answer(status, headers, content)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_uvicorn_refuses_a_200_mb_body_before_it_comes(servers):  # noqa: F811
    server = servers()
    before = peak_memory(server.process.pid)
    size = 200 * ONE_MB
    head = (
        f"POST /chat/whk_any/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Origin: https://widget.example\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\n\r\n"
    )
    part = b"x" * PART
    with socket.create_connection(("127.0.0.1", server.port), timeout=READ_TIMEOUT) as client:
        reader = client.makefile("rb")
        client.sendall(head.encode() + part)
        # Answered while the rest of the body is still to come: nothing waits for it.
        answer = read_answer(reader)
        assert_error(answer, 413, "PayloadTooLarge")
        assert answer.headers["access-control-allow-origin"] == "*"
        # The server reads the rest and drops it; then the connection serves
        # the next request.
        for _ in range(size // PART - 1):
            client.sendall(part)
        client.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert read_answer(reader).status_code == 200
    grown = peak_memory(server.process.pid) - before
    assert grown < 50 * ONE_MB, f"the server's peak memory grew by {grown // ONE_MB} MB"
