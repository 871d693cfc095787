"""The webhook client against real sockets: keep-alive and the reuse of
connections, a connection the server dropped while idle, every way an answer
can be framed or broken, timeouts, TLS, and URLs; on asyncio's loop and on
uvloop's, as the worker runs it."""

import asyncio
import base64
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvloop

from events.engine import webhook_client
from events.engine.webhook_client import (
    Failure,
    InvalidUrl,
    WebhookClient,
    WebhookRequest,
    WebhookResult,
    parse_target,
)

SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()

LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


@pytest.fixture(params=sorted(LOOPS))
def run(request) -> Iterator[Callable[..., Any]]:
    """Run a coroutine function with a fresh client on the chosen loop."""
    with asyncio.Runner(loop_factory=LOOPS[request.param]) as runner:

        def call(body: Callable[[WebhookClient], Any], **client_options: Any) -> Any:
            async def main() -> Any:
                client = WebhookClient(**client_options)
                try:
                    return await body(client)
                finally:
                    await client.close()

            return runner.run(main())

        yield call


def request(url: str, *, timeout: float = 5.0, body: str = '{"a":1}') -> WebhookRequest:
    return WebhookRequest(url=url, message_id="evt_1", body=body, secrets=[SECRET], timeout=timeout)


# --- a scripted server ---------------------------------------------------------------------


class Exchange:
    """One request as the server read it."""

    def __init__(self, head: str, body: bytes, connection: int) -> None:
        self.head = head
        self.body = body
        self.connection = connection  # which accepted connection carried it (1, 2, …)

    @property
    def request_line(self) -> str:
        return self.head.split("\r\n", 1)[0]

    def header(self, name: str) -> str | None:
        for line in self.head.split("\r\n")[1:]:
            key, _, value = line.partition(":")
            if key.strip().lower() == name.lower():
                return value.strip()
        return None


def read_request(stream: Any) -> tuple[str, bytes] | None:
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = stream.recv(1)
        if not chunk:
            return None
        head += chunk
    text = head.decode("latin-1")
    length = 0
    for line in text.split("\r\n")[1:]:
        key, _, value = line.partition(":")
        if key.strip().lower() == "content-length":
            length = int(value)
    body = b""
    while len(body) < length:
        body += stream.recv(length - len(body))
    return text, body


class RawServer:
    """Accepts connections and answers each request with what `answer`
    returns: raw bytes to write, and whether to close the connection after."""

    def __init__(
        self,
        answer: Callable[[Exchange], tuple[bytes, bool]],
        *,
        tls: ssl.SSLContext | None = None,
        family: int = socket.AF_INET,
    ) -> None:
        self.answer = answer
        self.exchanges: list[Exchange] = []
        self.connections = 0
        self.tls = tls
        self.listener = socket.socket(family, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        host = "::1" if family == socket.AF_INET6 else "127.0.0.1"
        self.listener.bind((host, 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str = "/hook", *, scheme: str = "http", host: str = "127.0.0.1") -> str:
        return f"{scheme}://{host}:{self.port}{path}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                number = self.connections
            threading.Thread(target=self._serve, args=(conn, number), daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            while True:
                got = read_request(conn)
                if got is None:
                    return
                exchange = Exchange(got[0], got[1], number)
                with self._lock:
                    self.exchanges.append(exchange)
                data, close = self.answer(exchange)
                if data:
                    conn.sendall(data)
                if close:
                    return
        except (OSError, ssl.SSLError):
            return
        finally:
            conn.close()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def servers() -> Iterator[Callable[..., RawServer]]:
    started: list[RawServer] = []

    def start(answer: Callable[[Exchange], tuple[bytes, bool]], **options: Any) -> RawServer:
        server = RawServer(answer, **options)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def ok(body: bytes = b"ok", *, extra: str = "") -> Callable[[Exchange], tuple[bytes, bool]]:
    def answer(exchange: Exchange) -> tuple[bytes, bool]:
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
        return head.encode() + body, False

    return answer


def post(client: WebhookClient, url: str, **options: Any) -> Any:
    return client.post(request(url, **options))


# --- keep-alive --------------------------------------------------------------------------


def test_one_connection_carries_request_after_request(run, servers):
    server = servers(ok())

    async def body(client: WebhookClient) -> list[WebhookResult]:
        return [await post(client, server.url()) for _ in range(20)]

    results = run(body)
    assert [r.status_code for r in results] == [200] * 20
    assert [r.response_excerpt for r in results] == ["ok"] * 20
    assert server.connections == 1
    assert {e.connection for e in server.exchanges} == {1}


def test_requests_at_once_take_connections_of_their_own_then_reuse_them(run, servers):
    server = servers(ok())

    async def body(client: WebhookClient) -> tuple[int, int]:
        await asyncio.gather(*(post(client, server.url()) for _ in range(10)))
        first = client.connections_made
        await asyncio.gather(*(post(client, server.url()) for _ in range(10)))
        return first, client.connections_made

    first, then = run(body)
    assert first == 10
    assert then == 10  # all ten reused
    assert server.connections == 10


def test_a_connection_the_server_dropped_while_idle_is_replaced_and_the_request_sent(run, servers):
    # The server answers and closes without saying so: the client pools the
    # connection, and finds it closed when it sends the next request.
    server = servers(lambda exchange: (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", True))

    async def body(client: WebhookClient) -> list[WebhookResult]:
        results = [await post(client, server.url())]
        await asyncio.sleep(0.05)
        results.append(await post(client, server.url()))
        return results

    results = run(body)
    assert [(r.status_code, r.error) for r in results] == [(200, "")] * 2
    assert len(server.exchanges) == 2
    assert server.connections == 2


def test_connection_close_is_honoured(run, servers):
    server = servers(ok(extra="Connection: close\r\n"))

    async def body(client: WebhookClient) -> int:
        for _ in range(3):
            assert (await post(client, server.url())).status_code == 200
        return client.idle_connections()

    assert run(body) == 0
    assert server.connections == 3


def test_idle_connections_are_closed_after_a_while(run, servers, monkeypatch):
    monkeypatch.setattr(webhook_client, "IDLE_SECONDS", 0.1)
    server = servers(ok())

    async def body(client: WebhookClient) -> tuple[int, int]:
        await post(client, server.url())
        before = client.idle_connections()
        await asyncio.sleep(0.35)
        return before, client.idle_connections()

    assert run(body) == (1, 0)


# --- what comes back ----------------------------------------------------------------------


def test_a_chunked_answer_is_read_and_the_connection_reused(run, servers):
    chunked = b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n"
    chunked += b"Retry-After: 30\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    server = servers(lambda exchange: (chunked, False))

    async def body(client: WebhookClient) -> list[WebhookResult]:
        return [await post(client, server.url()) for _ in range(2)]

    results = run(body)
    for result in results:
        assert (result.status_code, result.response_excerpt) == (503, "hello world")
        assert result.retry_after == "30"
    assert server.connections == 1


def test_an_answer_that_ends_with_the_connection_is_read(run, servers):
    server = servers(lambda exchange: (b"HTTP/1.0 202 Accepted\r\n\r\nqueued for later", True))
    result = run(lambda client: post(client, server.url()))
    assert (result.status_code, result.response_excerpt, result.error) == (
        202,
        "queued for later",
        "",
    )


def test_a_huge_answer_gives_its_start_and_closes_the_connection(run, servers):
    huge = b"x" * (webhook_client.DRAIN_BYTES * 4)
    server = servers(ok(huge))

    async def body(client: WebhookClient) -> tuple[WebhookResult, int]:
        return await post(client, server.url()), client.idle_connections()

    result, idle = run(body)
    assert result.status_code == 200
    assert result.response_excerpt == "x" * webhook_client.EXCERPT_BYTES
    assert idle == 0


def test_an_interim_answer_is_skipped_for_the_real_one(run, servers):
    answer = b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n"
    answer += b"HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\ndone"
    server = servers(lambda exchange: (answer, False))
    result = run(lambda client: post(client, server.url()))
    assert (result.status_code, result.response_excerpt) == (201, "done")


def test_binary_and_invalid_utf8_in_the_excerpt_are_replaced(run, servers):
    server = servers(ok(b"bad\x00\xff\xfe"))
    result = run(lambda client: post(client, server.url()))
    assert result.response_excerpt == "bad\ufffd\ufffd\ufffd"


def test_a_server_that_closes_without_answering(run, servers):
    server = servers(lambda exchange: (b"", True))
    result = run(lambda client: post(client, server.url()))
    assert result.status_code is None
    assert result.failure == Failure.CONNECTION
    assert result.error == "The server closed the connection before answering"


def test_an_answer_that_is_not_http(run, servers):
    server = servers(lambda exchange: (b"SSH-2.0-OpenSSH_9.2\r\n\r\n", True))
    result = run(lambda client: post(client, server.url()))
    assert result.failure == Failure.CONNECTION
    assert result.error.startswith("The webhook's answer could not be read: ")


def test_an_answer_cut_in_its_body_counts_by_its_status(run, servers):
    # The webhook said what it did; only the text after it was lost.
    server = servers(
        lambda exchange: (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", True)
    )

    async def body(client: WebhookClient) -> tuple[WebhookResult, int]:
        return await post(client, server.url()), client.idle_connections()

    result, idle = run(body)
    assert (result.status_code, result.response_excerpt, result.failure) == (200, "short", None)
    assert idle == 0


def test_an_answer_cut_in_its_head(run, servers):
    server = servers(lambda exchange: (b"HTTP/1.1 200 OK\r\nContent-Le", True))
    result = run(lambda client: post(client, server.url()))
    assert result.failure == Failure.CONNECTION
    assert "in the middle of its answer" in result.error


def test_a_timeout_names_its_length_and_drops_the_connection(run, servers):
    hang = threading.Event()

    def answer(exchange: Exchange) -> tuple[bytes, bool]:
        hang.wait(5)
        return b"", True

    server = servers(answer)

    async def body(client: WebhookClient) -> tuple[WebhookResult, int]:
        return await post(client, server.url(), timeout=0.2), client.idle_connections()

    result, idle = run(body)
    hang.set()
    assert result.failure == Failure.TIMEOUT
    assert result.error == "No response within 0.2 s"
    assert 150 <= result.duration_ms < 2000
    assert idle == 0


# --- connecting ------------------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_refused_connection(run):
    port = closed_port()
    result = run(lambda client: post(client, f"http://127.0.0.1:{port}/hook"))
    assert result.failure == Failure.CONNECTION
    assert result.error.startswith(f"Could not connect to 127.0.0.1:{port}: ")


def test_a_host_that_does_not_resolve(run):
    result = run(lambda client: post(client, "http://no-such-host.invalid/hook"))
    assert result.failure == Failure.CONNECTION
    assert result.error == "Could not resolve the host no-such-host.invalid"


def test_ipv6_literal_hosts(run, servers):
    try:
        server = servers(ok(), family=socket.AF_INET6)
    except OSError:
        pytest.skip("no IPv6 loopback here")
    result = run(lambda client: post(client, server.url(host="[::1]")))
    assert result.status_code == 200
    assert server.exchanges[0].header("Host") == f"[::1]:{server.port}"


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost"]
        + ["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    return cert, key


def tls_server_context(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    return context


def test_https_with_a_trusted_certificate(run, servers, certificate):
    server = servers(ok(), tls=tls_server_context(certificate))
    trusting = ssl.create_default_context(cafile=str(certificate[0]))

    async def body(client: WebhookClient) -> list[WebhookResult]:
        return [await post(client, server.url(scheme="https", host="localhost")) for _ in range(3)]

    results = run(body, ssl_context=trusting)
    assert [r.status_code for r in results] == [200] * 3
    assert server.connections == 1
    assert server.exchanges[0].header("Host") == f"localhost:{server.port}"


def test_https_with_a_certificate_nobody_vouches_for(run, servers, certificate):
    server = servers(ok(), tls=tls_server_context(certificate))
    result = run(lambda client: post(client, server.url(scheme="https", host="localhost")))
    assert result.failure == Failure.CONNECTION
    assert result.error.startswith("TLS certificate of localhost was refused: ")
    assert server.exchanges == []


# --- what is sent -------------------------------------------------------------------------


def test_the_request_carries_its_body_signature_and_fixed_headers(run, servers):
    from standardwebhooks.webhooks import Webhook

    server = servers(ok())
    payload = '{"text":"héllo ✓"}'
    run(lambda client: client.post(request(server.url("/a/b?x=1&y=2"), body=payload)))
    [exchange] = server.exchanges
    assert exchange.request_line == "POST /a/b?x=1&y=2 HTTP/1.1"
    assert exchange.header("Host") == f"127.0.0.1:{server.port}"
    assert exchange.header("Content-Type") == "application/json"
    assert exchange.header("User-Agent") == webhook_client.USER_AGENT
    assert exchange.header("Content-Length") == str(len(payload.encode()))
    assert exchange.body == payload.encode()
    headers = {
        name: exchange.header(name)
        for name in ("webhook-id", "webhook-timestamp", "webhook-signature")
    }
    assert Webhook(SECRET).verify(exchange.body, headers) == {"text": "héllo ✓"}


def test_credentials_in_the_url_are_sent_as_basic_authentication(run, servers):
    server = servers(ok())
    url = f"http://bot%40x:p%3Ass@127.0.0.1:{server.port}/hook"
    assert run(lambda client: post(client, url)).status_code == 200
    expected = "Basic " + base64.b64encode(b"bot@x:p:ss").decode()
    assert server.exchanges[0].header("Authorization") == expected


@pytest.mark.parametrize(
    ("url", "line", "host"),
    [
        ("http://example.com", "POST / HTTP/1.1", "example.com"),
        ("https://example.com:443/x", "POST /x HTTP/1.1", "example.com"),
        (
            "http://example.com:8080/a b/é?q=ü v",
            "POST /a%20b/%C3%A9?q=%C3%BC%20v HTTP/1.1",
            "example.com:8080",
        ),
        ("http://bücher.example/hook#frag", "POST /hook HTTP/1.1", "xn--bcher-kva.example"),
        ("HTTP://EXAMPLE.com/Path%2F", "POST /Path%2F HTTP/1.1", "example.com"),
    ],
)
def test_targets(url, line, host):
    target = parse_target(url)
    head = target.head.decode("latin-1").split("\r\n")
    assert head[0] == line
    assert head[1] == f"Host: {host}"


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/hook",
        "example.com/hook",
        "http:///hook",
        "http://example.com:99999/hook",
        "http://example.com:0/hook",
        "http://exa mple.com/hook",
        "http://[::1/hook",
    ],
)
def test_urls_that_cannot_be_requested(run, url):
    with pytest.raises(InvalidUrl):
        parse_target(url)
    result = run(lambda client: post(client, url))
    assert result.failure == Failure.INVALID_URL
    assert result.error.startswith("The webhook URL cannot be requested: ")


def test_a_host_is_resolved_once_for_many_connections(servers, monkeypatch):
    server = servers(ok())
    calls: list[tuple[Any, ...]] = []
    real = asyncio.base_events.BaseEventLoop.getaddrinfo

    async def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "getaddrinfo", counting)

    async def body(client: WebhookClient) -> list[WebhookResult]:
        url = server.url(host="localhost")
        return list(await asyncio.gather(*(post(client, url) for _ in range(10))))

    with asyncio.Runner() as runner:
        results = runner.run(_with_client(body))
    assert [r.status_code for r in results] == [200] * 10
    assert server.connections == 10
    assert [args[:2] for args in calls] == [("localhost", server.port)]


async def _with_client(body: Callable[[WebhookClient], Any]) -> Any:
    client = WebhookClient()
    try:
        return await body(client)
    finally:
        await client.close()
