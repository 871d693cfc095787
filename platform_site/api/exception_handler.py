"""One error body for every failure, from DRF views and from Django itself."""

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from django.core.exceptions import DisallowedHost, RequestDataTooBig
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db import IntegrityError, OperationalError
from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions as drf
from rest_framework.response import Response
from rest_framework.views import set_rollback

from platform_site.api import errors
from platform_site.api.database import database_pool_check
from platform_site.foundation import domain_errors

logger = logging.getLogger("platform_site.errors")
_COMPACT = {"separators": (",", ":")}

_BY_STATUS: dict[int, type[errors.APIError]] = {
    cls.status_code: cls
    for cls in (
        errors.InvalidPayload,
        errors.Unauthorized,
        errors.Forbidden,
        errors.ResourceNotFound,
        errors.MethodNotFound,
        errors.AlreadyExists,
        errors.PayloadTooLarge,
        errors.UnsupportedMediaType,
        errors.RateLimited,
    )
}

# The contract's error type of each kind of refusal a service raises.
_DOMAIN_ERRORS: dict[type[domain_errors.DomainError], type[errors.APIError]] = {
    domain_errors.NotFound: errors.ResourceNotFound,
    domain_errors.MissingReference: errors.ReferenceNotFound,
    domain_errors.InvalidValue: errors.InvalidPayload,
    domain_errors.InvalidFilter: errors.InvalidQuery,
    domain_errors.TooLarge: errors.PayloadTooLarge,
    domain_errors.MalformedId: errors.InvalidIdentifier,
    domain_errors.AlreadyExists: errors.AlreadyExists,
    domain_errors.NotPermitted: errors.Forbidden,
}


def log_client_error(error_id: str, error: errors.APIError) -> None:
    """Every error id is in the log, so a client's report can be traced."""
    logger.info(
        "%s %s %s: %s",
        error_id,
        error.status_code,
        error.type,
        error.message,
        extra={"error_id": error_id},
    )


def error_body(error: errors.APIError, error_id: str) -> dict[str, Any]:
    return {
        "id": error_id,
        "code": error.status_code,
        "type": error.type,
        "message": error.message,
    }


def describe_validation_error(detail: Any, path: str = "") -> list[str]:
    """Flatten DRF's nested error detail into `where: what` lines."""
    if isinstance(detail, Mapping):
        lines: list[str] = []
        for key, value in detail.items():
            if key == "non_field_errors":
                lines += describe_validation_error(value, path)
            elif isinstance(key, int):  # DRF keys a list's item errors by index
                lines += describe_validation_error(value, f"{path}[{key}]")
            else:
                lines += describe_validation_error(value, f"{path}.{key}" if path else str(key))
        return lines
    if isinstance(detail, Sequence) and not isinstance(detail, str):
        if all(isinstance(item, str) for item in detail):
            return [f"{path}: {item}" if path else str(item) for item in detail]
        lines = []
        for index, item in enumerate(detail):
            if item:
                lines += describe_validation_error(item, f"{path}[{index}]")
        return lines
    return [f"{path}: {detail}" if path else str(detail)]


def to_api_error(exc: BaseException) -> errors.APIError | None:
    """The contract's error for an exception, or None when it was unexpected."""
    if isinstance(exc, errors.APIError):
        return exc
    if isinstance(exc, domain_errors.DomainError):
        return domain_error(exc)
    if isinstance(exc, drf.ValidationError):
        return errors.InvalidPayload("; ".join(describe_validation_error(exc.detail)))
    if isinstance(exc, drf.ParseError):
        return errors.InvalidPayload(str(exc.detail))
    if isinstance(exc, drf.NotAuthenticated | drf.AuthenticationFailed):
        auth_header = getattr(exc, "auth_header", None)
        if auth_header:
            return errors.Unauthorized(str(exc.detail), headers={"WWW-Authenticate": auth_header})
        return errors.Forbidden(str(exc.detail))
    if isinstance(exc, drf.Throttled):
        return errors.RateLimited.retry_in(getattr(exc, "wait", None) or 1)
    if isinstance(exc, drf.MethodNotAllowed):
        return errors.MethodNotFound(str(exc.detail))
    if isinstance(exc, drf.UnsupportedMediaType):
        return errors.UnsupportedMediaType(
            "The request body must be JSON with Content-Type: application/json"
        )
    if isinstance(exc, drf.PermissionDenied):
        return errors.Forbidden(str(exc.detail))
    if isinstance(exc, DjangoPermissionDenied):
        return errors.Forbidden()
    if isinstance(exc, drf.NotFound | Http404):
        return errors.ResourceNotFound()
    if isinstance(exc, RequestDataTooBig):
        return errors.PayloadTooLarge()
    if isinstance(exc, drf.APIException):
        cls = _BY_STATUS.get(exc.status_code, errors.InvalidPayload)
        return cls(str(exc.detail))
    if isinstance(exc, IntegrityError):
        return integrity_error(exc)
    if isinstance(exc, OperationalError):
        # The database out of reach, no free connection in the pool within
        # DATABASE_POOL_TIMEOUT, a lock not granted: nothing the client did,
        # and likely to pass. Logged with its trace as a 5xx.
        return errors.Unavailable()
    return None


def domain_error(exc: domain_errors.DomainError) -> errors.APIError:
    """A service's refusal as the contract says it: the type of its kind
    (or of the nearest kind it derives from) and its message."""
    for kind in type(exc).__mro__:
        if kind in _DOMAIN_ERRORS:
            return _DOMAIN_ERRORS[kind](exc.message)
    return errors.InvalidPayload(exc.message)


def integrity_error(exc: IntegrityError) -> errors.APIError | None:
    """A constraint broken by a concurrent request between this request's
    reads and its commit (a user deleting themselves while they post, two
    requests making the same id): the transaction was rolled back, so the
    client is told what happened and may retry. Services catch the cases
    they expect; this is the net under the rest."""
    sqlstate = getattr(exc.__cause__, "sqlstate", None)
    text = str(exc)
    if sqlstate == "23503" or "FOREIGN KEY constraint failed" in text:
        return errors.ReferenceNotFound(
            "Something this request refers to was deleted while it ran; nothing was written"
        )
    if sqlstate == "23505" or "UNIQUE constraint failed" in text:
        return errors.AlreadyExists(
            "Another request made the same object at the same time; nothing was written"
        )
    return None


def handle_exception(exc: Exception, context: Mapping[str, Any]) -> Response:
    """DRF's EXCEPTION_HANDLER: every exception becomes the one error body."""
    error = to_api_error(exc)
    error_id = errors.new_error_id()
    if error is None:
        error = errors.Internal()
        logger.error("%s unexpected error", error_id, exc_info=exc, extra={"error_id": error_id})
    elif isinstance(error, errors.Unavailable):
        # Expected while the database or the broker is away (a restart):
        # one line with what failed, not a trace per request.
        cause = exc.__cause__ or exc
        logger.warning(
            "%s %s: %s",
            error_id,
            error.message,
            _one_line(cause),
            extra={"error_id": error_id},
        )
        if isinstance(exc, OperationalError) or isinstance(exc.__cause__, OperationalError):
            database_pool_check()
    elif error.status_code >= 500:
        logger.error("%s %s", error_id, error.message, exc_info=exc, extra={"error_id": error_id})
    else:
        log_client_error(error_id, error)
    set_rollback()
    return Response(error_body(error, error_id), status=error.status_code, headers=error.headers)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def error_response(error: errors.APIError) -> JsonResponse:
    """The error body outside DRF: middleware and Django's own error views."""
    error_id = errors.new_error_id()
    log_client_error(error_id, error)
    return _json_error(error, error_id)


def _json_error(error: errors.APIError, error_id: str) -> JsonResponse:
    response = JsonResponse(
        error_body(error, error_id),
        status=error.status_code,
        json_dumps_params=_COMPACT,
    )
    for name, value in error.headers.items():
        response[name] = value
    return response


def bad_request(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    if isinstance(exception, DisallowedHost):
        # A scanner's or a misrouted client's doing, not a fault of ours: one
        # line, where Django's security logger (muted in settings) prints a
        # trace at ERROR.
        error = errors.InvalidPayload("The Host header names no host this server answers to")
        error_id = errors.new_error_id()
        # Django's text quotes the Host with repr(): it stays on one line.
        logger.warning(
            "%s 400 %s: %s",
            error_id,
            error.type,
            str(exception)[:300],
            extra={"error_id": error_id},
        )
        return _json_error(error, error_id)
    return error_response(errors.InvalidPayload("Bad request"))


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return error_response(errors.Forbidden())


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return error_response(errors.ResourceNotFound(f"No route matches {request.path}"))


def server_error(request: HttpRequest) -> JsonResponse:
    error_id = errors.new_error_id()
    # Django calls this from inside its exception handling, so the trace is at hand.
    logger.exception(
        "%s unexpected error on %s %s",
        error_id,
        request.method,
        request.path,
        extra={"error_id": error_id},
    )
    return JsonResponse(
        error_body(errors.Internal(), error_id), status=500, json_dumps_params=_COMPACT
    )
