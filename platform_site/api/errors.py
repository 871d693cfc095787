"""The error types of the contract. Raise them; the exception handler renders them."""

import math
import secrets
import time
from typing import ClassVar


def new_error_id() -> str:
    return f"err_{int(time.time() * 1000)}x{secrets.token_hex(4).upper()}"


class APIError(Exception):
    status_code: ClassVar[int] = 500
    type: ClassVar[str] = "Internal"
    default_message: ClassVar[str] = "An internal error occurred"

    def __init__(self, message: str | None = None, *, headers: dict[str, str] | None = None):
        self.message = message or self.default_message
        self.headers = headers or {}
        super().__init__(self.message)


class InvalidPayload(APIError):
    status_code = 400
    type = "InvalidPayload"
    default_message = "The request body is invalid"


class InvalidQuery(APIError):
    status_code = 400
    type = "InvalidQuery"
    default_message = "A query parameter is invalid"


class InvalidIdentifier(APIError):
    status_code = 400
    type = "InvalidIdentifier"
    default_message = "The identifier in the path is invalid"


class RequestTimeout(InvalidPayload):
    """The request did not arrive in time (its headers, or its body): 408,
    typed as the contract's nearest kind."""

    status_code = 408
    default_message = "The request did not arrive in time"


class LengthRequired(InvalidPayload):
    status_code = 411
    default_message = "A request body needs a Content-Length header"


class ReferenceNotFound(APIError):
    status_code = 400
    type = "ReferenceNotFound"
    default_message = "A referenced object was not found"


class Unauthorized(APIError):
    status_code = 401
    type = "Unauthorized"
    default_message = "Authentication credentials were not provided or are invalid"


class Forbidden(APIError):
    status_code = 403
    type = "Forbidden"
    default_message = "You are not allowed to perform this action"


class ResourceNotFound(APIError):
    status_code = 404
    type = "ResourceNotFound"
    default_message = "The requested resource was not found"


class MethodNotFound(APIError):
    status_code = 405
    type = "MethodNotFound"
    default_message = "Method not allowed on this route"


class AlreadyExists(APIError):
    status_code = 409
    type = "AlreadyExists"
    default_message = "The resource already exists"


class IdempotencyConflict(APIError):
    """The answer kept for the key could not be read back (it expired as a
    twin ran): a retry a moment later starts afresh, so this says when
    (`Retry-After`, seconds)."""

    status_code = 409
    type = "IdempotencyConflict"
    default_message = "Another request with this Idempotency-Key just ended; retry shortly"

    def __init__(self, message: str | None = None, *, headers: dict[str, str] | None = None):
        super().__init__(message, headers={"Retry-After": "1", **(headers or {})})


class PayloadTooLarge(APIError):
    status_code = 413
    type = "PayloadTooLarge"
    default_message = "The request body is too large"


class UriTooLong(PayloadTooLarge):
    status_code = 414
    default_message = "The request target is too long"


class HeadersTooLarge(PayloadTooLarge):
    status_code = 431
    default_message = "The request headers are too large"


class UnsupportedMediaType(APIError):
    status_code = 415
    type = "UnsupportedMediaType"
    default_message = "The request body must be application/json"


class IdempotencyMismatch(APIError):
    status_code = 422
    type = "IdempotencyMismatch"
    default_message = "This Idempotency-Key was used with another request"


class RateLimited(APIError):
    status_code = 429
    type = "RateLimited"
    default_message = "Too many requests"

    @classmethod
    def retry_in(cls, seconds: float, *, headers: dict[str, str] | None = None) -> "RateLimited":
        """Refused until `seconds` from now: said in whole seconds, at least one."""
        wait = max(math.ceil(seconds), 1)
        return cls(
            f"Too many requests: retry in {wait} s",
            headers={"Retry-After": str(wait), **(headers or {})},
        )


class Internal(APIError):
    pass


class Unavailable(APIError):
    """The service cannot do its work right now (database or broker out of
    reach, no free database connection): 503, worth retrying, so it always
    says when (`Retry-After`, in seconds)."""

    status_code = 503
    type = "Unavailable"
    default_message = "The service is unavailable; retry shortly"

    def __init__(self, message: str | None = None, *, headers: dict[str, str] | None = None):
        super().__init__(message, headers={"Retry-After": "1", **(headers or {})})
