from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string

from platform_site.api import errors
from platform_site.api.exception_handler import error_response


class BodySizeLimitMiddleware:
    """413 before a byte of an oversize body is read: 50 MB on the admin API,
    1 MB everywhere else (runtime and chat), except the bytes of a file sent
    to its upload URL (FILE_UPLOAD_MAX_SIZE; the view holds them to the size
    the file announced)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
            # Django reads a WSGI body up to Content-Length only: a chunked
            # body would reach the view empty, and be blamed for missing fields.
            return error_response(
                errors.InvalidPayload(
                    "Chunked request bodies are not supported: send Content-Length"
                )
            )
        raw_length = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw_length)
        except ValueError:
            return error_response(errors.InvalidPayload("Content-Length is not a number"))
        if request.path.startswith(settings.FILE_UPLOAD_PATH):
            limit = settings.FILE_UPLOAD_MAX_SIZE
        elif request.path.startswith(("/v1/admin/", "/admin/")):
            limit = settings.ADMIN_BODY_LIMIT
        else:
            limit = settings.RUNTIME_BODY_LIMIT
        if length > limit:
            return error_response(
                errors.PayloadTooLarge(f"The request body is over the limit of {limit} bytes")
            )
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
