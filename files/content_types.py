"""A file's media type: inferred from its key when not given, and checked
against the first bytes of an upload for the formats that announce
themselves with a signature."""

import mimetypes
import re

DEFAULT_CONTENT_TYPE = "application/octet-stream"

# type/subtype, then optional parameters (RFC 9110 tokens, around `;` the
# spaces and tabs of RFC 9110's OWS). The OpenAPI document states it as is.
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_QUOTED = r'"[^"\x00]*"'
MEDIA_TYPE_RE = rf"{_TOKEN}/{_TOKEN}(?:[ \t]*;[ \t]*{_TOKEN}=(?:{_QUOTED}|{_TOKEN}))*"
_MEDIA_TYPE = re.compile(MEDIA_TYPE_RE)

# Markdown is not in every system's table.
_EXTRA_TYPES = {".md": "text/markdown", ".markdown": "text/markdown"}

# Leading bytes of formats whose files always start with them.
_SIGNATURES: dict[str, tuple[bytes, ...]] = {
    "application/pdf": (b"%PDF-",),
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "application/zip": (b"PK\x03\x04", b"PK\x05\x06"),
}
_KIND_NAMES = {"application/pdf": "a PDF", "application/zip": "a ZIP archive"}


def media_type(content_type: str) -> str:
    """`text/plain; charset=utf-8` → `text/plain`."""
    return content_type.split(";", 1)[0].strip().lower()


def content_type_for_key(key: str) -> str:
    suffix = key[key.rfind(".") :].lower() if "." in key else ""
    guessed, _ = mimetypes.guess_type(f"file{suffix}", strict=False)
    return _EXTRA_TYPES.get(suffix) or guessed or DEFAULT_CONTENT_TYPE


def signature_mismatch(content_type: str, head: bytes) -> str | None:
    """Why `head`, the first bytes of an upload, cannot be of `content_type`,
    or None when they can (or the type has no signature to check)."""
    announced = media_type(content_type)
    expected = _SIGNATURES.get(announced)
    if expected is not None and not head.startswith(expected):
        kind = _KIND_NAMES.get(announced, announced)
        return f"The bytes are not {kind}, as the file's contentType {announced} announces"
    if announced.startswith("text/"):
        for other, signatures in _SIGNATURES.items():
            if head.startswith(signatures):
                return (
                    f"The bytes are {_KIND_NAMES.get(other, other)}, not {announced} text:"
                    f" set contentType to {other}"
                )
    return None
