"""The ASGI application: the whole API, and the only server of the live
stream (GET /chat/{webhookId}/conversations/{id}/listen, and the official
webchat's GET /chat/{clientId}/initialize), whose async views
hold thousands of idle listeners in one process. `make run` and the
production recipe serve it with uvicorn (platform_site/serve.py), one process
per core. Requests with a body small enough to hold go through Django's WSGI
handler on a few threads (platform_site/server/wsgi_bridge.py); the stream,
downloads, file uploads and big bodies through Django's ASGI handler, which
streams answers and spools bodies."""

import asyncio
import gc
import itertools
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.core.asgi import get_asgi_application
from django.core.handlers.asgi import ASGIHandler
from django.core.wsgi import get_wsgi_application

from platform_site.api.body_limits import BODY_REFUSAL, body_overrun, body_refusal
from platform_site.server.wsgi_bridge import Receive, Scope, Send, WsgiBridge, header

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")
django_application = get_asgi_application()

# Once Django is set up: it reads the files app's models.
from files.upload_admission import is_upload, upload_refusal  # noqa: E402

# Threads that run the synchronous part of every listener's request (the
# middleware, its lookups), one request at a time each.
LISTENER_THREADS = 4


class ListenerHandler(ASGIHandler):
    """Django's handler, but its requests share a few threads. Django gives
    each request a thread of its own for the whole response: for a stream,
    one idle thread per listener (some 300 KB each) for hours."""

    def __init__(self) -> None:
        super().__init__()
        self._executors = itertools.cycle(
            [
                ThreadPoolExecutor(max_workers=1, thread_name_prefix="listener")
                for _ in range(LISTENER_THREADS)
            ]
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with ThreadSensitiveContext(executor=next(self._executors)):
            await self.handle(scope, receive, send)


listener_application = ListenerHandler()


async def _body_withheld() -> Mapping[str, Any]:
    """What Django gets when it listens for the client's disconnect (until
    its answer is sent) after a refused body: nothing, ever. The rest of the
    body must not reach it (it takes a body message there for a broken
    server), nor be read at all; the server discards it after the answer."""
    never: asyncio.Future[Mapping[str, Any]] = asyncio.get_running_loop().create_future()
    return await never


_END_OF_BODY: Mapping[str, Any] = {"type": "http.request", "body": b"", "more_body": False}


def body_guard(scope: Scope, receive: Receive, refusal: Any = None) -> Receive:
    """Django's handler reads the whole body (into a temporary file) before
    any middleware runs, so the body limit is applied here: a body its
    headers condemn is not read at all, and a body is cut where it runs past
    its Content-Length (at once without one). Django then gets an empty body,
    and the refusal in the scope, which BodySizeLimitMiddleware sends back:
    through the middleware, so that the answer carries the CORS headers of a
    chat route and is logged like any other error. `refusal` is one found
    before (an upload its headers condemn: files/upload_admission.py)."""
    content_length = header(scope, b"content-length")
    refusal = (
        body_refusal(
            path=scope["path"],
            content_length=content_length,
            transfer_encoding=header(scope, b"transfer-encoding") or "",
        )
        or refusal
    )
    if refusal is not None:
        scope[BODY_REFUSAL] = refusal
        answered = False

        async def refused() -> Mapping[str, Any]:
            nonlocal answered
            if answered:
                return await _body_withheld()
            answered = True
            return _END_OF_BODY

        return refused

    # Within the limit, or body_refusal would have answered.
    announced = int(content_length or "0")
    received = 0

    async def counted() -> Mapping[str, Any]:
        nonlocal received
        if BODY_REFUSAL in scope:
            return await _body_withheld()
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > announced:
                scope[BODY_REFUSAL] = body_overrun(content_length=content_length)
                return _END_OF_BODY
        return message

    return counted


# Bodies above this are spooled to disk by Django's own ASGI handler (file
# uploads, big admin requests) rather than held in memory by the bridge.
BRIDGE_BODY_LIMIT = 1024 * 1024

views_application = WsgiBridge(get_wsgi_application())


def _is_listen(path: str) -> bool:
    """A live stream: a conversation's (`…/listen`) or the official
    webchat's (`…/initialize`). Wider than the routes (chat/live/urls.py):
    anything else it takes in is served as usual, only on a shared thread."""
    return path.startswith("/chat/") and path.endswith(("/listen", "/initialize"))


def _bridged(scope: Scope) -> bool:
    path: str = scope["path"]
    if _is_listen(path):
        return False
    if path.startswith((settings.FILE_UPLOAD_PATH, settings.FILE_DOWNLOAD_PATH)):
        return False
    length = header(scope, b"content-length")
    return length is None or not length.isdigit() or int(length) <= BRIDGE_BODY_LIMIT


async def websocket_refused(scope: Scope, receive: Receive, send: Send) -> None:
    """A WebSocket upgrade, which no route serves: the one error body (400)
    through the server's denial response, where Django's handler would fail
    with a traceback and a 500. A server without the extension closes the
    handshake (it answers 403)."""
    # Imported here: DRF and the app's errors load once Django is set up.
    from platform_site.api import errors
    from platform_site.api.exception_handler import error_response

    await receive()  # websocket.connect
    refusal = error_response(
        errors.InvalidPayload(
            "This server speaks HTTP only: send the request without `Upgrade: websocket`"
        )
    )
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008})
        return
    headers = [(name.lower().encode(), value.encode()) for name, value in refusal.items()]
    await send(
        {"type": "websocket.http.response.start", "status": refusal.status_code, "headers": headers}
    )
    await send({"type": "websocket.http.response.body", "body": refusal.content})


async def application(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "websocket":
        await websocket_refused(scope, receive, send)
        return
    if scope["type"] != "http":
        await django_application(scope, receive, send)
        return
    if _bridged(scope):
        await views_application(scope, receive, send)
        return
    # A copy: the server's scope is not ours to mark.
    scope = {**scope}
    refusal = None
    if is_upload(scope):
        # Checked from its headers before a byte of its body is read.
        refusal = await sync_to_async(upload_refusal, thread_sensitive=False)(
            path=scope["path"],
            content_length=header(scope, b"content-length"),
            content_type=header(scope, b"content-type") or "",
        )
    receive = body_guard(scope, receive, refusal)
    if _is_listen(scope["path"]):
        await listener_application(scope, receive, send)
    else:
        await django_application(scope, receive, send)


# What start-up loaded lives as long as the process: frozen out of the
# collector's sight, later collections stop walking it on every request.
gc.collect()
gc.freeze()
