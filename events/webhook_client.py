"""POSTs signed webhook requests, many at once, on one event loop per process.

A delivery task hands over a batch; the requests go out concurrently over
pooled keep-alive connections, so a batch costs about its slowest receiver,
not the sum of them. The loop and its connection pool live as long as the
worker process, so connections to a bot are reused from one batch to the next.
"""

import asyncio
import atexit
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import aiohttp

from events.signing import signature_headers

USER_AGENT = "bot-platform-webhooks/1"
EXCERPT_BYTES = 1000
# Requests in flight per process: bounded so that a batch of slow receivers
# cannot open thousands of sockets at once.
MAX_IN_FLIGHT = 256


@dataclass(frozen=True)
class WebhookRequest:
    url: str
    message_id: str
    body: str
    secrets: Sequence[str]
    timeout: float  # seconds the whole request may take, connecting included


class Failure:
    """Why no response came back, in the words a bot developer can act on."""

    TIMEOUT = "timeout"
    CONNECTION = "connection"
    INVALID_URL = "invalid_url"


@dataclass(frozen=True)
class WebhookResult:
    started_at: datetime
    duration_ms: int
    status_code: int | None = None
    response_excerpt: str = ""
    retry_after: str | None = None
    failure: str | None = None
    error: str = ""


class _Loop:
    """One asyncio loop and one aiohttp session per process, made on first use
    (after a fork: a worker's pool children each make their own)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.runner = asyncio.Runner()
        self.session: aiohttp.ClientSession | None = None
        self.in_flight: asyncio.Semaphore | None = None

    async def open(self) -> tuple[aiohttp.ClientSession, asyncio.Semaphore]:
        if self.session is None or self.in_flight is None:
            self.session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=60),
                headers={"User-Agent": USER_AGENT, "Content-Type": "application/json"},
                auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(),
            )
            self.in_flight = asyncio.Semaphore(MAX_IN_FLIGHT)
            atexit.register(self.close)
        return self.session, self.in_flight

    def close(self) -> None:
        if self.session is not None and os.getpid() == self.pid:
            self.runner.run(self.session.close())
        self.runner.close()


_loop: _Loop | None = None


def post_all(requests: Sequence[WebhookRequest]) -> list[WebhookResult]:
    """Send every request (each signed at the moment it goes out) and answer
    one result per request, in order. Never raises for a receiver's failure."""
    global _loop
    if _loop is None or _loop.pid != os.getpid():
        _loop = _Loop()
    loop = _loop
    return loop.runner.run(_post_all(loop, requests))


async def _post_all(loop: _Loop, requests: Sequence[WebhookRequest]) -> list[WebhookResult]:
    session, in_flight = await loop.open()
    return list(
        await asyncio.gather(*(_post_one(session, in_flight, request) for request in requests))
    )


async def _post_one(
    session: aiohttp.ClientSession,
    in_flight: asyncio.Semaphore,
    request: WebhookRequest,
) -> WebhookResult:
    async with in_flight:
        started_at = datetime.now(UTC)
        clock = time.perf_counter()

        def elapsed() -> int:
            return round((time.perf_counter() - clock) * 1000)

        headers = signature_headers(
            message_id=request.message_id,
            body=request.body,
            secrets=request.secrets,
            moment=started_at,
        )
        try:
            async with session.post(
                request.url,
                data=request.body.encode(),
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=request.timeout),
                allow_redirects=False,
            ) as response:
                excerpt = await response.content.read(EXCERPT_BYTES)
                return WebhookResult(
                    started_at=started_at,
                    duration_ms=elapsed(),
                    status_code=response.status,
                    # NUL as well: PostgreSQL text cannot hold it, and a
                    # compressed or binary answer is full of them.
                    response_excerpt=excerpt.decode("utf-8", errors="replace").replace(
                        "\x00", "\ufffd"
                    ),
                    retry_after=response.headers.get("Retry-After"),
                )
        except TimeoutError:
            return WebhookResult(
                started_at=started_at,
                duration_ms=elapsed(),
                failure=Failure.TIMEOUT,
                error=f"No response within {request.timeout:g} s",
            )
        except (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError) as exc:
            return WebhookResult(
                started_at=started_at,
                duration_ms=elapsed(),
                failure=Failure.INVALID_URL,
                error=f"The webhook URL cannot be requested: {exc}",
            )
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            return WebhookResult(
                started_at=started_at,
                duration_ms=elapsed(),
                failure=Failure.CONNECTION,
                error=_connection_error(exc),
            )


def _connection_error(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"Could not resolve the host {exc.host}"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"TLS certificate of {exc.host} was refused: {exc.certificate_error}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        reason = exc.os_error.strerror or str(exc.os_error) if exc.os_error else str(exc)
        return f"Could not connect to {exc.host}:{exc.port}: {reason}"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "The server closed the connection before answering"
    if isinstance(exc, socket.gaierror):
        return f"Could not resolve the host: {exc.strerror}"
    return f"Connection error: {exc.__class__.__name__}: {exc}"[:500]
