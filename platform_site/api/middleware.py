from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from platform_site.api import errors
from platform_site.api.exception_handler import error_response


class BodySizeLimitMiddleware:
    """413 before a byte of an oversize body is read: 50 MB on the admin API,
    1 MB everywhere else (runtime and chat)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        raw_length = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw_length)
        except ValueError:
            return error_response(errors.InvalidPayload("Content-Length is not a number"))
        limit = (
            settings.ADMIN_BODY_LIMIT
            if request.path.startswith(("/v1/admin/", "/admin/"))
            else settings.RUNTIME_BODY_LIMIT
        )
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
