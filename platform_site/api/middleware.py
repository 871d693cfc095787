from collections.abc import Callable

from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string

from platform_site.api import errors
from platform_site.api.body_limits import BODY_REFUSAL, body_refusal
from platform_site.api.exception_handler import error_response


class BodySizeLimitMiddleware:
    """413 before a byte of an oversize body is read (platform_site.api.body_limits
    has the rule). Under ASGI the body was never handed to Django when
    platform_site.asgi refused it: its refusal is answered here, so that the
    answer goes through the same middleware (CORS headers, logging) as any other."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # Left by platform_site.asgi (in the scope) or its bridge (in the
        # environ) for a body they stopped reading.
        refusal = (
            request.scope.get(BODY_REFUSAL)
            if isinstance(request, ASGIRequest)
            else request.META.get(BODY_REFUSAL)
        )
        if refusal is None:
            refusal = body_refusal(
                path=request.path,
                content_length=request.META.get("CONTENT_LENGTH"),
                transfer_encoding=request.META.get("HTTP_TRANSFER_ENCODING", ""),
            )
        if refusal is not None:
            return error_response(refusal)
        return self.get_response(request)


class RejectNulMiddleware:
    """PostgreSQL cannot store the NUL character: a path or query parameter
    holding one is a client error, refused before any view reads it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path:
            return error_response(errors.InvalidIdentifier("The path contains a NUL character"))
        if "%00" in request.META.get("QUERY_STRING", ""):
            return error_response(errors.InvalidQuery("A query parameter contains a NUL character"))
        return self.get_response(request)


class BrowserPagesOnly:
    """Runs the middleware in settings.BROWSER_MIDDLEWARE (sessions, logged-in
    accounts, messages, static files, frame options) for browser pages only:
    the JSON API authenticates every request by header and needs none of
    them, and they cost it a sixth of its CPU.

    Only middleware without process_view / process_exception hooks can stand
    in that list, since Django calls those hooks for its own list alone."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.api = get_response
        browser = get_response
        for path in reversed(settings.BROWSER_MIDDLEWARE):
            browser = import_string(path)(browser)
        self.browser = browser

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(settings.API_PATH_PREFIXES):
            return self.api(request)
        return self.browser(request)
