"""A document's bytes to passages.

One reader per format turns the document into structural blocks (titles,
paragraphs, lists, tables, code…) in document order; chunking turns blocks
into passages no longer than the caller's limit. Everything a person could
fix about a document is raised as UnreadableDocument with a reason to show.
"""

from collections.abc import Iterable

from files.parsing import html, markdown, pdf, plain_text
from files.parsing.blocks import Block
from files.parsing.chunking import passages_from_blocks
from files.parsing.decoding import decode_text, html_declared_charset, parse_content_type
from files.parsing.errors import UnreadableDocument
from files.passage_data import PassageData

__all__ = ["SUPPORTED_CONTENT_TYPES", "UnreadableDocument", "extract_passages"]

_PLAIN_TEXT = ("text/plain",)
_MARKDOWN = ("text/markdown", "text/x-markdown")
_HTML = ("text/html", "application/xhtml+xml")
_PDF = ("application/pdf",)

SUPPORTED_CONTENT_TYPES: tuple[str, ...] = _PLAIN_TEXT + _MARKDOWN + _HTML + _PDF


def extract_passages(
    data: bytes, *, content_type: str, max_length: int, source_url: str = ""
) -> list[PassageData]:
    """The passages of a document, in document order, each at most
    `max_length` characters; `source_url` on each (for HTML, the document's
    canonical URL wins). Raises UnreadableDocument with a reason to show."""
    media_type, parameters = parse_content_type(content_type)
    if media_type not in SUPPORTED_CONTENT_TYPES:
        named = f"Files of type {media_type!r}" if media_type else "Files without a content type"
        raise UnreadableDocument(
            f"{named} cannot be indexed: supported types are {', '.join(SUPPORTED_CONTENT_TYPES)}."
        )
    if not data:
        raise UnreadableDocument("The file is empty: upload a file with some text in it.")
    charset = parameters.get("charset") or None
    blocks: Iterable[Block]
    if media_type in _PDF:
        blocks = pdf.read_blocks(data)
    elif media_type in _HTML:
        document = html.read_html(decode_text(data, charset=charset or html_declared_charset(data)))
        blocks = document.blocks
        source_url = document.canonical_url or source_url
    elif media_type in _MARKDOWN:
        blocks = markdown.read_blocks(decode_text(data, charset=charset))
    else:
        blocks = plain_text.read_blocks(decode_text(data, charset=charset))
    passages = passages_from_blocks(blocks, max_length=max_length, source_url=source_url)
    if not passages:
        raise UnreadableDocument(
            "The document contains no text to index: check that you uploaded the right file."
        )
    return passages
