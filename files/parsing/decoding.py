"""Content types and the decoding of text documents."""

import codecs
import re

from files.parsing.errors import UnreadableDocument

_HTML_META_CHARSET = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
# Where the HTML standard stops looking for a <meta charset>.
_HTML_SNIFF_BYTES = 1024


def parse_content_type(content_type: str) -> tuple[str, dict[str, str]]:
    """The media type, lower-cased, and its parameters (names lower-cased,
    quotes removed): "Text/Plain; Charset="latin-1"" → ("text/plain", {"charset": "latin-1"})."""
    media_type, *parameters = content_type.split(";")
    parsed: dict[str, str] = {}
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip():
            parsed[name.strip().lower()] = value.strip().strip('"').strip()
    return media_type.strip().lower(), parsed


def html_declared_charset(data: bytes) -> str | None:
    """The charset an HTML document declares in a <meta> near its start, if
    Python knows it. An unknown or UTF-16 declaration is ignored, as browsers
    do (a document whose <meta> could be read as ASCII is not UTF-16)."""
    match = _HTML_META_CHARSET.search(data, 0, _HTML_SNIFF_BYTES)
    if match is None:
        return None
    name = match.group(1).decode("ascii")
    try:
        codec = codecs.lookup(name)
    except LookupError:
        return None
    return None if codec.name.startswith("utf-16") else name


def decode_text(data: bytes, *, charset: str | None) -> str:
    """`data` decoded strictly with `charset` (UTF-8 when None, its BOM dropped).

    Strict, because replacing undecodable bytes would index mojibake that
    nobody notices; the reason says where the first bad byte is.
    """
    name = charset or "UTF-8"
    try:
        codec = codecs.lookup(name)
    except LookupError:
        codec = None
    # Codecs such as base64 or zlib are bytes-to-bytes and decode no text.
    if codec is None or not getattr(codec, "_is_text_encoding", True):
        raise UnreadableDocument(
            f"The charset {name!r} named in contentType is unknown: name a text charset "
            "such as utf-8, latin-1 or windows-1252."
        )
    skipped = len(codecs.BOM_UTF8) if codec.name == "utf-8" and data[:3] == codecs.BOM_UTF8 else 0
    try:
        text = str(memoryview(data)[skipped:], codec.name)
    except UnicodeDecodeError as exc:
        raise UnreadableDocument(
            f"The file is not valid {name} text: the byte at offset {exc.start + skipped} "
            "cannot be decoded. Save the file as UTF-8, or name its charset in contentType "
            "(for example text/plain; charset=windows-1252)."
        ) from None
    if "\x00" in text:
        raise UnreadableDocument(
            "The file contains NUL characters and looks like a binary file, not text: "
            "check that you uploaded the right file with the right contentType."
        )
    return text
