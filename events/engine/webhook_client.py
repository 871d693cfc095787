"""POSTs signed webhook requests over pooled HTTP/1.1 keep-alive connections,
on the caller's asyncio loop.

Written on asyncio's transports, with httptools (llhttp, as uvicorn uses)
parsing the answers, rather than through a general-purpose client: a delivery
is one request shape, and it reads one status, two headers and the start of a
body. aiohttp's per-request bookkeeping cost about 190 µs of CPU against 30–45
µs for the same POST here (BENCHMARKS.md §3), and on a worker that sends
thousands a second that was most of its CPU.

Connections are kept per origin (scheme, host, port) and reused, most recent
first; one idle for IDLE_SECONDS is closed. A server may close an idle
connection just as a request goes out on it: a request that got no byte of
answer on a reused connection is sent once more on a new one (a bot drops
the repeat by its webhook-id, as with any redelivery).
"""

import asyncio
import base64
import ipaddress
import socket
import ssl
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast
from urllib.parse import quote, unquote, urlsplit

import aiohappyeyeballs
import httptools

from events.engine.signing import signatures

USER_AGENT = "bot-platform-webhooks/1"
EXCERPT_BYTES = 1000
# An answer's body is read to its end, so that its connection can carry the
# next request, when it is at most this long; past it the connection is closed.
DRAIN_BYTES = 64 * 1024
# Idle connections older than this are closed rather than reused (servers
# close theirs after 5 s to 75 s; a stale one costs a second send, not a failure).
IDLE_SECONDS = 15.0
# Parsed webhook URLs kept, most recently used first.
TARGET_CACHE_SIZE = 4096
# Seconds before the next address of a host is tried while one still connects.
HAPPY_EYEBALLS_DELAY = 0.25
# Seconds a host's resolved addresses are kept (as aiohttp does by default).
DNS_TTL_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class WebhookRequest:
    url: str
    message_id: str
    body: str
    secrets: Sequence[str]
    timeout: float  # seconds the whole request may take, connecting included
    # Header lines of the bot's delivery format (formats.py), CRLF-ended.
    headers: bytes = b""


class Failure:
    """Why no response came back, in the words a bot developer can act on."""

    TIMEOUT = "timeout"
    CONNECTION = "connection"
    INVALID_URL = "invalid_url"


@dataclass(frozen=True, slots=True)
class WebhookResult:
    started_at: datetime
    duration_ms: int
    status_code: int | None = None
    response_excerpt: str = ""
    retry_after: str | None = None
    failure: str | None = None
    error: str = ""


class InvalidUrl(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class _Target:
    """A webhook URL, parsed once: where to connect and the request's fixed head."""

    origin: tuple[str, str, int]
    host: str
    port: int
    tls: bool
    head: bytes  # request line and the headers every request to it carries


def parse_target(url: str) -> _Target:
    """The connection and request head for `url`, or InvalidUrl saying why not."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidUrl(str(exc)) from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise InvalidUrl(f"{scheme or 'no'} scheme: only http and https are requested")
    host = parts.hostname
    if not host:
        raise InvalidUrl("it names no host")
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise InvalidUrl(f"{host!r} is not a valid host name") from None
    if not all(c.isalnum() or c in ".-_:" for c in ascii_host):
        raise InvalidUrl(f"{host!r} is not a valid host name")
    if port == 0:
        raise InvalidUrl("port 0 cannot be connected to")
    tls = scheme == "https"
    default_port = 443 if tls else 80
    port = port or default_port
    named = f"[{ascii_host}]" if ":" in ascii_host else ascii_host
    host_header = named if port == default_port else f"{named}:{port}"
    # Anything but the characters a request target may hold is percent-encoded
    # (a URL typed with spaces or non-ASCII letters), existing escapes kept.
    target = quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~")
    if parts.query:
        target += "?" + quote(parts.query, safe="/%:@!$&'()*+,;=-._~?")
    lines = [
        f"POST {target} HTTP/1.1",
        f"Host: {host_header}",
        f"User-Agent: {USER_AGENT}",
        "Content-Type: application/json",
    ]
    if parts.username is not None:
        credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        lines.append("Authorization: Basic " + base64.b64encode(credentials.encode()).decode())
    head = "\r\n".join(lines) + "\r\n"
    return _Target((scheme, ascii_host, port), ascii_host, port, tls, head.encode("latin-1"))


class _Unanswered(ConnectionError):
    """The connection closed before any byte of an answer came."""


class _BadAnswer(ConnectionError):
    """What came back is not an HTTP answer, or stopped in the middle of one."""


class _Answer:
    __slots__ = ("status", "retry_after", "excerpt", "length", "reusable", "started")

    def __init__(self) -> None:
        self.status: int | None = None
        self.retry_after: str | None = None
        self.excerpt = bytearray()
        self.length = 0
        self.reusable = True
        self.started = False  # a byte of it has come


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection; one exchange at a time."""

    def __init__(self, origin: tuple[str, str, int]) -> None:
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.parser: httptools.HttpResponseParser | None = None
        self.answer = _Answer()
        self.waiter: asyncio.Future[_Answer] | None = None
        self.closed = False
        self.idle_since = 0.0

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but are ones.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self.waiter is None or self.parser is None:
            # Bytes nobody asked for: the connection cannot be trusted any more.
            self.close()
            return
        self.answer.started = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(_BadAnswer(f"the answer is not valid HTTP ({exc})"))

    def eof_received(self) -> bool:
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        answer = self.answer
        if self.waiter is None or self.waiter.done():
            return
        if answer.status is not None:
            # A body that runs until the connection closes (no length given).
            answer.reusable = False
            self.waiter.set_result(answer)
        elif answer.started:
            self._fail(_BadAnswer("the server closed the connection in the middle of its answer"))
        else:
            self._fail(_Unanswered(str(exc) if exc else "closed"))

    # httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) == 11 and name.lower() == b"retry-after":
            self.answer.retry_after = value.decode("latin-1").strip()

    def on_headers_complete(self) -> None:
        assert self.parser is not None
        self.answer.status = self.parser.get_status_code()
        if not self.parser.should_keep_alive():
            self.answer.reusable = False

    def on_body(self, body: bytes) -> None:
        answer = self.answer
        if len(answer.excerpt) < EXCERPT_BYTES:
            answer.excerpt += body[: EXCERPT_BYTES - len(answer.excerpt)]
        answer.length += len(body)
        if answer.length > DRAIN_BYTES:
            # Not worth reading to the end: answer with what we have and close.
            answer.reusable = False
            self._resolve()
            self.close()

    def on_message_complete(self) -> None:
        status = self.answer.status
        if status is not None and 100 <= status < 200:
            # An interim answer (103 Early Hints): the real one follows.
            self.answer = _Answer()
            self.answer.started = True
            return
        self._resolve()

    # the exchange

    def exchange(self, head: bytes, body: bytes) -> "asyncio.Future[_Answer]":
        assert self.transport is not None
        self.parser = httptools.HttpResponseParser(self)
        self.answer = _Answer()
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(head + body)
        return self.waiter

    def finished(self) -> None:
        """The exchange is over and its answer taken: ready for the next."""
        self.waiter = None
        self.parser = None

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def _resolve(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(self.answer)

    def _fail(self, exc: Exception) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc)
        self.abort()


class WebhookClient:
    """Webhook POSTs on the running loop, over connections kept per origin.
    Use it from one event loop; `close()` it on that loop."""

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self._ssl = ssl_context or ssl.create_default_context()
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._targets: OrderedDict[str, _Target | InvalidUrl] = OrderedDict()
        self._addresses: dict[tuple[str, int], tuple[float, asyncio.Future[Any]]] = {}
        self._sweep: asyncio.TimerHandle | None = None
        self.connections_made = 0

    async def post(self, request: WebhookRequest) -> WebhookResult:
        """Send the request (signed at the moment it goes out) and answer its
        result. Never raises for a receiver's failure."""
        started_at = datetime.now(UTC)
        clock = time.perf_counter()

        def result(**fields: object) -> WebhookResult:
            duration = round((time.perf_counter() - clock) * 1000)
            return WebhookResult(started_at=started_at, duration_ms=duration, **fields)  # type: ignore[arg-type]

        try:
            target = self._target(request.url)
        except InvalidUrl as exc:
            return result(
                failure=Failure.INVALID_URL,
                error=f"The webhook URL cannot be requested: {exc}",
            )
        body = request.body.encode()
        timestamp = int(started_at.timestamp())
        signature = signatures(
            message_id=request.message_id, timestamp=timestamp, body=body, secrets=request.secrets
        )
        head = (
            target.head
            + request.headers
            + (
                f"Content-Length: {len(body)}\r\n"
                f"webhook-id: {request.message_id}\r\n"
                f"webhook-timestamp: {timestamp}\r\n"
                f"webhook-signature: {signature}\r\n\r\n"
            ).encode("latin-1")
        )
        connection: _Connection | None = None
        try:
            async with asyncio.timeout(request.timeout):
                connection = self._reuse(target.origin)
                answer: _Answer | None = None
                if connection is not None:
                    try:
                        answer = await connection.exchange(head, body)
                    except _Unanswered:
                        connection = None
                if answer is None:
                    connection = await self._connect(target)
                    answer = await connection.exchange(head, body)
        except TimeoutError:
            if connection is not None:
                connection.abort()
            return result(
                failure=Failure.TIMEOUT, error=f"No response within {request.timeout:g} s"
            )
        except asyncio.CancelledError:
            if connection is not None:
                connection.abort()
            raise
        except (OSError, _BadAnswer) as exc:
            if connection is not None:
                connection.abort()
            return result(failure=Failure.CONNECTION, error=_connection_error(exc, target)[:500])
        assert connection is not None
        connection.finished()
        if answer.reusable and not connection.closed:
            self._keep(connection)
        else:
            connection.close()
        return result(
            status_code=answer.status,
            # NUL as well: PostgreSQL text cannot hold it, and a compressed
            # or binary answer is full of them.
            response_excerpt=answer.excerpt.decode("utf-8", errors="replace").replace(
                "\x00", "\ufffd"
            ),
            retry_after=answer.retry_after,
        )

    async def close(self) -> None:
        """Close every idle connection (the busy ones are their callers')."""
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for pool in self._idle.values():
            for connection in pool:
                connection.close()
        self._idle.clear()
        # Let the transports' close callbacks run before the loop goes.
        await asyncio.sleep(0)

    def idle_connections(self) -> int:
        return sum(len(pool) for pool in self._idle.values())

    def _target(self, url: str) -> _Target:
        found = self._targets.get(url)
        if found is None:
            try:
                found = parse_target(url)
            except InvalidUrl as exc:
                found = exc
            self._targets[url] = found
            if len(self._targets) > TARGET_CACHE_SIZE:
                self._targets.popitem(last=False)
        else:
            self._targets.move_to_end(url)
        if isinstance(found, InvalidUrl):
            raise found
        return found

    def _reuse(self, origin: tuple[str, str, int]) -> _Connection | None:
        pool = self._idle.get(origin)
        if not pool:
            return None
        limit = asyncio.get_running_loop().time() - IDLE_SECONDS
        while pool:
            connection = pool.pop()
            if not connection.closed and connection.idle_since > limit:
                return connection
            connection.close()
        return None

    async def _connect(self, target: _Target) -> _Connection:
        loop = asyncio.get_running_loop()
        addresses = await self._resolve(loop, target)
        context = self._ssl if target.tls else None
        hostname = target.host if target.tls else None
        if len(addresses) == 1:
            # One address, nothing to race: the loop connects (in C under
            # uvloop), where Happy Eyeballs' Python made a refused
            # connection cost a worker as much as its recording.
            family, _, _, _, address = addresses[0]
            _, connection = await loop.create_connection(
                lambda: _Connection(target.origin),
                host=address[0],
                port=address[1],
                family=family,
                ssl=context,
                server_hostname=hostname,
            )
            self.connections_made += 1
            return connection
        # Happy Eyeballs (RFC 8305): a host whose IPv6 route is broken still
        # connects over IPv4 a moment later, on asyncio's loop and uvloop's.
        sock = await aiohappyeyeballs.start_connection(
            addresses, happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY, interleave=1
        )
        try:
            _, connection = await loop.create_connection(
                lambda: _Connection(target.origin),
                sock=sock,
                ssl=context,
                server_hostname=hostname,
            )
        except BaseException:
            sock.close()
            raise
        self.connections_made += 1
        return connection

    async def _resolve(
        self, loop: asyncio.AbstractEventLoop, target: _Target
    ) -> list[tuple[Any, ...]]:
        """The host's addresses, kept DNS_TTL_SECONDS: a burst to a bot opens
        many connections at once, and each would ask the resolver (on a
        thread of the loop's executor) otherwise. Connections made while the
        host is being resolved wait for that answer."""
        key = (target.host, target.port)
        known = self._addresses.get(key)
        if known is not None and known[0] > loop.time():
            return await asyncio.shield(known[1])
        answer: asyncio.Future[Any]
        try:
            literal = ipaddress.ip_address(target.host)
        except ValueError:
            answer = loop.create_task(
                loop.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
            )
        else:
            family = socket.AF_INET6 if literal.version == 6 else socket.AF_INET
            address: tuple[Any, ...] = (target.host, target.port)
            answer = loop.create_future()
            answer.set_result([(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", address)])
        self._addresses[key] = (loop.time() + DNS_TTL_SECONDS, answer)
        if len(self._addresses) > TARGET_CACHE_SIZE:
            self._addresses.pop(next(iter(self._addresses)))
        try:
            return list(await asyncio.shield(answer))
        except OSError:
            # Not kept: the next connection asks again.
            if self._addresses.get(key, (0, None))[1] is answer:
                del self._addresses[key]
            raise

    def _keep(self, connection: _Connection) -> None:
        loop = asyncio.get_running_loop()
        connection.idle_since = loop.time()
        self._idle.setdefault(connection.origin, []).append(connection)
        if self._sweep is None:
            self._sweep = loop.call_later(IDLE_SECONDS, self._close_expired)

    def _close_expired(self) -> None:
        """Close connections idle too long, so that sockets do not linger."""
        loop = asyncio.get_running_loop()
        limit = loop.time() - IDLE_SECONDS
        for origin in list(self._idle):
            pool = self._idle[origin]
            kept = [c for c in pool if not c.closed and c.idle_since > limit]
            for connection in pool:
                if connection not in kept:
                    connection.close()
            if kept:
                self._idle[origin] = kept
            else:
                del self._idle[origin]
        self._sweep = loop.call_later(IDLE_SECONDS, self._close_expired) if self._idle else None


def _connection_error(exc: BaseException, target: _Target) -> str:
    host, port = target.host, target.port
    if isinstance(exc, _Unanswered):
        return "The server closed the connection before answering"
    if isinstance(exc, _BadAnswer):
        return f"The webhook's answer could not be read: {exc}"
    if isinstance(exc, socket.gaierror):
        return f"Could not resolve the host {host}"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate of {host} was refused: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS with {host} failed: {exc.reason or exc}"
    if isinstance(exc, ConnectionResetError):
        return "The server reset the connection before answering"
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return f"Could not connect to {host}:{port}: {reason}"
