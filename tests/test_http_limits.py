"""What the web server takes from a client before a view sees the request
(platform_site/server/http_protocol.py): the head's bytes, lines and target, the
time its head and body may take, idle connections. Spoken byte by byte to
uvicorn as the Procfile starts it, with the timeouts shortened to a second."""

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import assert_error
from tests.raw_http import RawAnswer, read_to_close, send_raw
from tests.servers import READ_TIMEOUT, Server

HOST = b"Host: 127.0.0.1\r\n"
TIMEOUT = 1.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Nothing here reaches the database."""
    folder: Path = tmp_path_factory.mktemp("server")
    env = {
        **os.environ,
        "DATA_DIR": str(folder / "data"),
        "PYTHONUNBUFFERED": "1",
        "HTTP_HEADERS_TIMEOUT": str(TIMEOUT),
        "HTTP_BODY_TIMEOUT": str(TIMEOUT),
        "HTTP_BODY_MIN_RATE": "1000",
        "HTTP_KEEP_ALIVE_TIMEOUT": str(TIMEOUT),
    }
    started = Server(name="web", env=env, folder=folder)
    try:
        started.wait_ready()
        yield started
    finally:
        started.stop()


@pytest.fixture(autouse=True)
def no_trace_in_the_log(server: Server) -> Iterator[None]:
    yield
    log = server.log()
    assert "Traceback" not in log and "[error" not in log, log


def connect(server: Server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=READ_TIMEOUT)


def healthz(headers: bytes = HOST, target: bytes = b"/healthz", version: bytes = b"1.1") -> bytes:
    return b"GET %s HTTP/%s\r\n%sConnection: close\r\n\r\n" % (target, version, headers)


def timed(
    server: Server, request: bytes, *parts: bytes, every: float = 0.0
) -> tuple[RawAnswer, float]:
    """The answer to `request`, then `parts` sent `every` seconds apart
    while the server listens, and the seconds it took."""
    started = time.monotonic()
    with connect(server) as client:
        client.sendall(request)
        for part in parts:
            time.sleep(every)
            try:
                client.sendall(part)
            except OSError:  # answered and closed meanwhile
                break
        answer = RawAnswer(read_to_close(client))
    return answer, time.monotonic() - started


def assert_refused(server: Server, answer: RawAnswer, status: int, type_: str) -> dict[str, object]:
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["connection"] == "close"
    body = assert_error(answer, status, type_)
    assert body["id"] in server.log()
    return body


# --- the head ---------------------------------------------------------------------------


def test_a_head_within_its_byte_limit_is_served(server):
    answer = send_raw(server, healthz(HOST + b"X-Big: " + b"a" * 30_000 + b"\r\n"))
    assert answer.status_code == 200


def test_a_head_over_its_byte_limit_is_431(server):
    answer = send_raw(server, healthz(HOST + b"X-Big: " + b"a" * 40_000 + b"\r\n"))
    body = assert_refused(server, answer, 431, "PayloadTooLarge")
    assert "32768 bytes" in str(body["message"])


def test_a_header_of_twenty_megabytes_is_refused_at_the_limit_not_read_whole(server):
    sent = 0
    with connect(server) as client:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
        client.sendall(b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-Big: ")
        piece = b"a" * 65536
        try:
            while sent < 20 * 1024 * 1024:
                client.sendall(piece)
                sent += len(piece)
        except OSError:  # the server answered and closed
            pass
        answer = RawAnswer(read_to_close(client))
    assert_refused(server, answer, 431, "PayloadTooLarge")
    # What the server read is the limit; the rest is what the kernels'
    # buffers took before it closed.
    assert sent < 10 * 1024 * 1024


def test_a_hundred_header_lines_are_served_and_one_more_is_431(server):
    lines = b"".join(b"X-%d: a\r\n" % index for index in range(98))
    # With Host and Connection: a hundred lines.
    assert send_raw(server, healthz(HOST + lines)).status_code == 200
    answer = send_raw(server, healthz(HOST + lines + b"X-One-More: a\r\n"))
    body = assert_refused(server, answer, 431, "PayloadTooLarge")
    assert "100 header lines" in str(body["message"])


def test_a_target_over_its_limit_is_414(server):
    assert send_raw(server, healthz(target=b"/healthz?q=" + b"a" * 8000)).status_code == 200
    answer = send_raw(server, healthz(target=b"/healthz?q=" + b"a" * 9000))
    body = assert_refused(server, answer, 414, "PayloadTooLarge")
    assert "8192 bytes" in str(body["message"])


def test_a_target_bigger_than_the_whole_head_limit_is_414_too(server):
    answer = send_raw(server, healthz(target=b"/healthz?q=" + b"a" * 100_000))
    assert_refused(server, answer, 414, "PayloadTooLarge")


def test_an_http_1_1_request_without_host_is_400_and_1_0_is_served(server):
    answer = send_raw(server, b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n")
    body = assert_refused(server, answer, 400, "InvalidPayload")
    assert "Host" in str(body["message"])
    assert send_raw(server, b"GET /healthz HTTP/1.0\r\n\r\n").status_code == 200


def test_an_absolute_target_names_the_host_that_allowed_hosts_judges(server):
    foreign = send_raw(server, healthz(target=b"http://evil.example/healthz"))
    assert "Host" in str(assert_error(foreign, 400, "InvalidPayload")["message"])
    own = f"http://127.0.0.1:{server.port}/healthz".encode()
    answer = send_raw(server, healthz(b"Host: evil.example\r\n", target=own))
    assert answer.status_code == 200


def test_a_chunked_body_is_411(server):
    answer = send_raw(
        server,
        b"POST /v1/chat/events HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    )
    body = assert_error(answer, 411, "InvalidPayload")
    assert "Content-Length" in str(body["message"])


def test_pipelined_requests_are_each_answered(server):
    with connect(server) as client:
        client.sendall(b"GET /healthz HTTP/1.1\r\n" + HOST + b"\r\n" + healthz())
        received = read_to_close(client)
    assert received.count(b"HTTP/1.1 200 OK") == 2


# --- time -------------------------------------------------------------------------------


def test_a_head_that_does_not_arrive_in_time_is_408(server):
    answer, took = timed(server, b"GET /healthz HTTP/1.1\r\n" + HOST)
    body = assert_refused(server, answer, 408, "InvalidPayload")
    assert "headers" in str(body["message"])
    assert TIMEOUT <= took < TIMEOUT + 3


def test_a_head_sent_a_byte_at_a_time_is_408_at_its_deadline(server):
    head = b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-Slow: " + b"a" * 100
    answer, took = timed(server, head[:1], *[bytes([byte]) for byte in head[1:]], every=0.1)
    assert_refused(server, answer, 408, "InvalidPayload")
    assert took < TIMEOUT + 3


@pytest.mark.parametrize(
    "target, length",
    [
        pytest.param(b"/v1/chat/events", 900_000, id="a body the bridge holds"),
        pytest.param(b"/v1/admin/bots", 2_000_000, id="a body Django's handler spools"),
    ],
)
def test_a_body_that_stops_coming_is_408(server, target, length):
    request = (
        b"POST %s HTTP/1.1\r\n%sContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n{" % (target, HOST, length)
    )
    answer, took = timed(server, request)
    body = assert_refused(server, answer, 408, "InvalidPayload")
    assert "body" in str(body["message"])
    assert TIMEOUT <= took < TIMEOUT + 3


def test_a_body_that_trickles_below_the_minimum_rate_is_408(server):
    # Never silent for a whole second, but a byte every 0.2 s is 5 bytes a
    # second, under the 1,000 required past the first second.
    request = (
        b"POST /v1/chat/events HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\n"
        b"Content-Length: 900000\r\n\r\n{"
    )
    answer, took = timed(server, request, *[b" "] * 40, every=0.2)
    assert_refused(server, answer, 408, "InvalidPayload")
    assert took < TIMEOUT + 3


def test_a_body_that_keeps_coming_is_read_past_the_grace(server):
    # 200 kB over some 1.5 s: longer than the grace, far above the rate.
    body = b"{}" + b" " * 199_998
    request = (
        b"POST /healthz HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body)
    )
    pieces = [body[start : start + 20_000] for start in range(0, len(body), 20_000)]
    answer, took = timed(server, request, *pieces, every=0.15)
    assert took > TIMEOUT
    # Read whole, then refused by the route, not by the clock.
    assert_error(answer, 405, "MethodNotFound")


def test_an_idle_connection_is_closed_before_and_between_requests(server):
    started = time.monotonic()
    with connect(server) as client:
        assert read_to_close(client) == b""
    # The server's clock starts when it accepts, a little before connect()
    # returns here: what this side measures may fall short by that much.
    assert TIMEOUT <= time.monotonic() - started + 0.1 < TIMEOUT + 3

    with connect(server) as client:
        client.sendall(b"GET /healthz HTTP/1.1\r\n" + HOST + b"\r\n")
        started = time.monotonic()
        answer = RawAnswer(read_to_close(client))
    assert answer.status_code == 200
    assert TIMEOUT <= time.monotonic() - started + 0.1 < TIMEOUT + 3


def test_slow_clients_leave_others_served(server):
    # A handful of the slowloris shape (bench/slow_clients.py measures 300):
    # while they hold their connections, a request from anyone else is
    # answered at once.
    holders = [connect(server) for _ in range(20)]
    try:
        for holder in holders:
            holder.sendall(b"GET /healthz HTTP/1.1\r\n" + HOST)
        answered: list[int] = []
        worker = threading.Thread(
            target=lambda: answered.append(send_raw(server, healthz()).status_code)
        )
        worker.start()
        worker.join(READ_TIMEOUT)
        assert answered == [200]
    finally:
        for holder in holders:
            holder.close()
