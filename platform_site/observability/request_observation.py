"""What every request leaves behind: its request id (X-Request-Id, taken from
the client or made here, bound to every log line of the request and sent
back), its metrics (route template, method, status, duration) and its
access log line.

The outermost middleware, so that it sees every answer, including those of
the other middleware (413, CORS preflights). A request is timed to its
answer's headers: a stream's body (the live stream, a download) goes on
after them."""

import logging
import random
import re
import time
from collections.abc import Callable

from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.utils.encoding import escape_uri_path
from structlog.contextvars import bind_contextvars, reset_contextvars

from platform_site.observability import metrics

logger = logging.getLogger("platform_site.access")

# A request id from the client is kept when it is a sane token: it ends up
# in every log line, so it may not carry a line break or a novel.
_CLIENT_REQUEST_ID = re.compile(r"[A-Za-z0-9._:@/+=-]{1,128}")
UNMATCHED = "unmatched"
# A method label outside these would let any client add series at will.
_METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"))


def request_id_of(request: HttpRequest) -> str:
    given = request.META.get("HTTP_X_REQUEST_ID")
    if given is not None and _CLIENT_REQUEST_ID.fullmatch(given):
        return given
    # 128 random bits, as a UUID's hex: a name for the request's lines, not
    # a secret, so not from the kernel (uuid4 asks it on every request).
    return f"{random.getrandbits(128):032x}"


def route_of(request: HttpRequest) -> str:
    """The route template (/v1/chat/events/<str:id>): bounded, unlike paths.
    Answers given before URL resolution (a refused body, a preflight, a
    static file, no route at all) are `unmatched`."""
    match = request.resolver_match
    return f"/{match.route}" if match is not None else UNMATCHED


def logged_path(request: HttpRequest) -> str:
    """The path as the access line gives it: a signed upload or download URL
    is a credential, so its signature stays out of the log; anything but
    printable ASCII is percent-encoded, as the client sent it, so that the
    line's message and its `path` field agree and a decoded line break
    cannot start a forged line."""
    path = request.path
    for prefix in (settings.FILE_UPLOAD_PATH, settings.FILE_DOWNLOAD_PATH):
        if path.startswith(prefix):
            return prefix + "…"
    if not (path.isascii() and path.isprintable()):
        return escape_uri_path(path)
    return path


class RequestObservationMiddleware:
    """Synchronous, as the middleware after it is: an asynchronous request
    (the live stream, downloads) runs it on a thread with a copy of the
    request's context, which asgiref copies back, so the request id stays
    bound while the answer streams."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response
        self.access_log = settings.WEB_ACCESS_LOG

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        started = time.perf_counter()
        request_id = request_id_of(request)
        bound = bind_contextvars(request_id=request_id)
        try:
            response = self.get_response(request)
            self._observe(request, response, request_id, started)
            return response
        finally:
            # The threads that run views under WSGI serve request after
            # request in one context: it is theirs to clean.
            if not isinstance(request, ASGIRequest):
                reset_contextvars(**bound)

    def _observe(
        self, request: HttpRequest, response: HttpResponseBase, request_id: str, started: float
    ) -> None:
        response["X-Request-Id"] = request_id
        seconds = time.perf_counter() - started
        method = request.method or ""
        metrics.http_request_observe(
            route=route_of(request),
            method=method if method in _METHODS else "other",
            status=response.status_code,
            seconds=seconds,
        )
        if self.access_log and logger.isEnabledFor(logging.INFO):
            path = logged_path(request)
            # Made and handled as logger.info would, but without its look
            # up the stack for the caller's file and line, which no line shows.
            record = logger.makeRecord(
                logger.name,
                logging.INFO,
                __file__,
                0,
                "%s %s %s",
                (method, path, response.status_code),
                None,
                extra={
                    "method": method,
                    "path": path,
                    "status": response.status_code,
                    "duration_ms": round(seconds * 1000, 1),
                    "client": request.META.get("REMOTE_ADDR", ""),
                },
            )
            logger.handle(record)
