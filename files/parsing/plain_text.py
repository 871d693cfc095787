"""Plain text: paragraphs are separated by blank lines (or form feeds).

No heading guessing: a short line in plain text may be a heading, a name or a
signature, and guessing wrong is worse than calling everything a paragraph.
"""

import re
from collections.abc import Iterator

from files.models import PassageSubtype
from files.parsing.blocks import Block

_PARAGRAPH_BREAK = re.compile(r"(?:\n[^\S\n]*\n|\f)\s*")


def read_blocks(text: str) -> Iterator[Block]:
    """The paragraphs of `text`, lazily: a 50 MB file never exists twice as a list."""
    start = 0
    for separator in _PARAGRAPH_BREAK.finditer(text):
        if separator.start() > start:
            yield Block(PassageSubtype.PARAGRAPH, text[start : separator.start()])
        start = separator.end()
    if start < len(text):
        yield Block(PassageSubtype.PARAGRAPH, text[start:])
