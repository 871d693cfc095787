"""How big a request body may be: one rule, applied by both servers before a
byte of the body is read. Under WSGI, BodySizeLimitMiddleware applies it;
under ASGI, Django's handler reads the whole body before any middleware runs,
so platform_site.asgi applies it first (and holds the body to its announced
length as it comes) and leaves its answer in the scope, under BODY_REFUSAL,
for the middleware to send."""

from django.conf import settings

from platform_site.api import errors

# The scope key under which platform_site.asgi leaves the refusal of a body it
# did not let Django read.
BODY_REFUSAL = "platform_site.body_refusal"


def body_limit(path: str) -> int:
    """50 MB on the admin API, 1 MB everywhere else (runtime and chat), except
    the bytes of a file sent to its upload URL (FILE_UPLOAD_MAX_SIZE; the view
    holds them to the size the file announced)."""
    if path.startswith(settings.FILE_UPLOAD_PATH):
        return settings.FILE_UPLOAD_MAX_SIZE
    if path.startswith(("/v1/admin/", "/admin/")):
        return settings.ADMIN_BODY_LIMIT
    return settings.RUNTIME_BODY_LIMIT


def body_refusal(
    *, path: str, content_length: str | None, transfer_encoding: str
) -> errors.APIError | None:
    """The error for a body its headers already condemn, or None."""
    if "chunked" in transfer_encoding.lower():
        # Views read Content-Length bytes (Django under WSGI, DRF under
        # either server): a chunked body would reach them empty, and be
        # blamed for missing fields. 411, as HTTP says for a server that
        # wants the length first.
        return errors.LengthRequired(
            "Chunked request bodies are not supported: send Content-Length"
        )
    try:
        length = int(content_length or "0")
    except ValueError:
        length = -1
    if length < 0:
        return errors.InvalidPayload("Content-Length is not a number")
    limit = body_limit(path)
    if length > limit:
        return errors.PayloadTooLarge(f"The request body is over the limit of {limit} bytes")
    return None


def body_overrun(*, content_length: str | None) -> errors.APIError:
    """The error for a body that goes on past the length its headers allowed
    it: none without Content-Length (an HTTP/2 body may come without), which
    views would read as empty."""
    if content_length is None:
        return errors.LengthRequired()
    return errors.InvalidPayload("The request body is longer than its Content-Length")
