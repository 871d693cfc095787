"""An upload checked from its request's headers, before its body is read.

Django's ASGI handler reads a whole body (into a temporary file) before any
view runs, and an upload's may be up to FILE_UPLOAD_MAX_SIZE: a request
with a bogus or expired URL, for a file that is gone or replaced, or
announcing another size or type than the file's, would make the server take
in up to a gigabyte before being refused. platform_site.asgi asks here
first and, when the answer is a refusal, lets Django read nothing."""

from typing import Any

from django.conf import settings

from files.services.file_uploads import file_upload_admit
from files.signed_urls import upload_grant
from platform_site.api.database import database_release
from platform_site.api.errors import APIError
from platform_site.api.exception_handler import domain_error
from platform_site.foundation.domain_errors import DomainError


def is_upload(scope: dict[str, Any]) -> bool:
    return scope.get("method") == "PUT" and str(scope["path"]).startswith(settings.FILE_UPLOAD_PATH)


def upload_refusal(*, path: str, content_length: str | None, content_type: str) -> APIError | None:
    """The error that refuses an upload from its headers alone, or None. A
    Content-Length that is no length is left to the body limit's check."""
    try:
        length = int(content_length or "0")
    except ValueError:
        return None
    token = path[len(settings.FILE_UPLOAD_PATH) :]
    try:
        file_upload_admit(grant=upload_grant(token), length=length, content_type=content_type)
    except APIError as error:
        return error
    except DomainError as refusal:
        return domain_error(refusal)
    finally:
        # Its own thread's connection, not a request's: given back now.
        database_release()
    return None
