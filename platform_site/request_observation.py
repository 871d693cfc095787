"""What every request leaves behind: its request id (X-Request-Id, taken from
the client or made here, bound to every log line of the request and sent
back), its metrics (route template, method, status, duration) and its
access log line.

The outermost middleware, so that it sees every answer, including those of
the other middleware (413, CORS preflights). A stream (the live stream) is
timed to its first byte."""

import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from structlog.contextvars import bind_contextvars, reset_contextvars

from platform_site import metrics

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
    return uuid.uuid4().hex


def route_of(request: HttpRequest) -> str:
    """The route template (/v1/chat/events/<str:id>): bounded, unlike paths.
    Answers given before URL resolution (a refused body, a preflight, a
    static file, no route at all) are `unmatched`."""
    match = request.resolver_match
    return f"/{match.route}" if match is not None else UNMATCHED


class RequestObservationMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.access_log = settings.WEB_ACCESS_LOG
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._observe_async(request)
        started = time.perf_counter()
        request_id = request_id_of(request)
        # Reset after: the threads that run views serve request after request.
        bound = bind_contextvars(request_id=request_id)
        try:
            response: HttpResponseBase = self.get_response(request)
            self._observe(request, response, request_id, started)
            return response
        finally:
            reset_contextvars(**bound)

    async def _observe_async(self, request: HttpRequest) -> HttpResponseBase:
        started = time.perf_counter()
        request_id = request_id_of(request)
        # Left bound: the request's task, whose context this is, goes on to
        # stream the answer, and its lines are the request's too.
        bind_contextvars(request_id=request_id)
        get_response: Callable[[HttpRequest], Awaitable[HttpResponseBase]] = self.get_response
        response = await get_response(request)
        self._observe(request, response, request_id, started)
        return response

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
        if self.access_log:
            logger.info(
                "%s %s %s",
                method,
                request.path,
                response.status_code,
                extra={
                    "method": method,
                    "path": request.path,
                    "status": response.status_code,
                    "duration_ms": round(seconds * 1000, 1),
                    "client": request.META.get("REMOTE_ADDR", ""),
                },
            )
