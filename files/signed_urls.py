"""Upload and download URLs that carry their own credential: a signature
over what they grant, with an expiry, so that a plain PUT or GET with no
Authorization header can be trusted for that one file."""

from dataclasses import dataclass

from django.conf import settings
from django.core import signing

from files.models import File
from platform_site.api.errors import Forbidden

_UPLOAD_SALT = "files.upload-url"
_DOWNLOAD_SALT = "files.download-url"
_PUBLIC_SALT = "files.public-url.stable"
# Public URLs of earlier versions: timestamped (the timestamp never checked).
_TIMESTAMPED_PUBLIC_SALT = "files.public-url"


@dataclass(frozen=True)
class UploadGrant:
    file_id: str
    upload_id: str


def upload_url(file: File) -> str:
    token = signing.dumps([file.id, file.upload_id], salt=_UPLOAD_SALT)
    return f"{settings.PUBLIC_BASE_URL}{settings.FILE_UPLOAD_PATH}{token}"


def upload_grant(token: str) -> UploadGrant:
    """What an upload URL's token grants, or Forbidden when it expired or was altered."""
    value = _unsign(token, _UPLOAD_SALT, settings.FILE_UPLOAD_URL_TTL, "upload")
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        raise Forbidden("The upload URL is invalid")
    return UploadGrant(file_id=value[0], upload_id=value[1])


def download_url(file: File) -> str:
    """A permanent URL for public content, else one that expires."""
    if "public_content" in file.access_policies:
        # No timestamp: the same URL for as long as the file is public,
        # across re-uploads and however often it is read.
        token = signing.Signer(salt=_PUBLIC_SALT).sign_object(file.id)
    else:
        token = signing.dumps([file.id, file.storage_name], salt=_DOWNLOAD_SALT)
    return f"{settings.PUBLIC_BASE_URL}{settings.FILE_DOWNLOAD_PATH}{token}"


@dataclass(frozen=True)
class DownloadGrant:
    file_id: str
    # The stored bytes the URL was made for; None for a public URL, which
    # follows the file's content as it changes.
    storage_name: str | None


def _public_file_id(token: str) -> object:
    try:
        return signing.Signer(salt=_PUBLIC_SALT).unsign_object(token)
    except signing.BadSignature:
        pass
    try:
        # Salts of their own: a token of one kind never verifies as the other.
        return signing.loads(token, salt=_TIMESTAMPED_PUBLIC_SALT)
    except signing.BadSignature:
        return None


def download_grant(token: str) -> DownloadGrant:
    public = _public_file_id(token)
    if isinstance(public, str):
        return DownloadGrant(file_id=public, storage_name=None)
    value = _unsign(token, _DOWNLOAD_SALT, settings.FILE_DOWNLOAD_URL_TTL, "download")
    if not (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], str)
    ):
        raise Forbidden("The download URL is invalid")
    return DownloadGrant(file_id=value[0], storage_name=value[1])


def _unsign(token: str, salt: str, max_age: int, kind: str) -> object:
    try:
        return signing.loads(token, salt=salt, max_age=max_age)
    except signing.SignatureExpired:
        raise Forbidden(f"The {kind} URL has expired: get a new one from the files API") from None
    except signing.BadSignature:
        raise Forbidden(f"The {kind} URL is invalid") from None
