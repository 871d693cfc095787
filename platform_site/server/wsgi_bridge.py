"""Every request but the live stream's, served by Django's WSGI handler on a
few threads of the ASGI process.

Django's own ASGI handler costs a synchronous view several hand-offs between
the event loop and a thread per request (the request_started and
request_finished signals, the middleware chain, a task that watches for the
client's disconnect), and queues every view of a process on one thread
(thread_sensitive). Here a request is read on the event loop, handed to a
thread once, and runs there exactly as under a WSGI server: the same
middleware, views, signals and database connections, at the same CPU cost.
The response comes back whole: what streams (the live stream, downloads)
is served by Django's ASGI handler (platform_site.asgi)."""

import asyncio
import io
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.core.handlers.wsgi import WSGIHandler

from platform_site.api.body_limits import BODY_REFUSAL, body_overrun, body_refusal

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[Mapping[str, Any]]]
Send = Callable[[Mapping[str, Any]], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]

# Threads per process that run views. They overlap one request's database
# round trips with another's Python; more only contend for the GIL.
WEB_THREADS = int(os.environ.get("WEB_THREADS", "2"))


def header(scope: Scope, name: bytes) -> str | None:
    """A request header as Django's request.META holds it: repeated values
    joined by commas."""
    values = [value.decode("latin1") for key, value in scope["headers"] if key.lower() == name]
    return ",".join(values) if values else None


class Disconnected(Exception):
    """The client went away before its body arrived."""


def _environ(scope: Scope, body: bytes) -> dict[str, Any]:
    """The WSGI environ of an ASGI scope, as a WSGI server would build it:
    PATH_INFO holds the path's UTF-8 bytes as latin-1 text (PEP 3333),
    repeated headers joined by commas."""
    server = scope.get("server") or ("localhost", 80)
    client = scope.get("client") or ("", 0)
    root_path: str = scope.get("root_path", "")
    environ: dict[str, Any] = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": root_path.encode("utf-8").decode("latin-1"),
        # An ASGI path holds the root path; a WSGI PATH_INFO does not.
        "PATH_INFO": scope["path"].removeprefix(root_path).encode("utf-8").decode("latin-1"),
        "QUERY_STRING": scope["query_string"].decode("latin-1"),
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1] or 80),
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "REMOTE_ADDR": client[0],
        "REMOTE_PORT": str(client[1]),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1").upper().replace("-", "_")
        if name not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            name = "HTTP_" + name
        value = raw_value.decode("latin-1")
        if name in environ:
            environ[name] += "," + value
        else:
            environ[name] = value
    return environ


async def _read_body(scope: Scope, receive: Receive, environ_extra: dict[str, Any]) -> bytes:
    """The whole body, or none at all when its headers already condemn it
    (the middleware then refuses it from the same headers) or it runs past
    its Content-Length (the refusal is left in the environ)."""
    length = header(scope, b"content-length")
    refusal = body_refusal(
        path=scope["path"],
        content_length=length,
        transfer_encoding=header(scope, b"transfer-encoding") or "",
    )
    if refusal is not None:
        return b""
    announced = int(length or "0")
    chunks: list[bytes] = []
    received = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Disconnected
        chunk = message.get("body", b"")
        received += len(chunk)
        if received > announced:
            environ_extra[BODY_REFUSAL] = body_overrun(content_length=length)
            return b""
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


class WsgiBridge:
    def __init__(self, application: WSGIHandler, threads: int = WEB_THREADS) -> None:
        self.application = application
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="view")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        extra: dict[str, Any] = {}
        try:
            body = await _read_body(scope, receive, extra)
        except Disconnected:
            return
        environ = _environ(scope, body)
        environ.update(extra)
        loop = asyncio.get_running_loop()
        start, content = await loop.run_in_executor(self.executor, self._run, environ)
        await send(start)
        await send({"type": "http.response.body", "body": content})

    def _run(self, environ: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        """In a view thread: the request, and its response whole. Closing the
        response ends the request (request_finished: the database connection
        goes back), on the thread that ran it."""
        started: list[Any] = []

        def start_response(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> Any:
            started[:] = [status, headers]
            return None

        response: Iterable[bytes] = self.application(environ, start_response)
        try:
            content = b"".join(response)
        finally:
            close = getattr(response, "close", None)
            if close is not None:
                close()
        status, headers = started
        start = {
            "type": "http.response.start",
            "status": int(status[:3]),
            "headers": [
                (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers
            ],
        }
        return start, content
