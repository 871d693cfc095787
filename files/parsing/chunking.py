"""Blocks to passages: normalise each block's whitespace, merge short
paragraphs, split what is longer than the passage limit.

Splitting never scans a block word by word: it looks at a window of
`max_length + 1` characters and cuts at the last boundary inside it, so the
cost is one regular-expression search per passage, whatever the block size.
"""

import re
import textwrap
from collections.abc import Callable, Iterable, Iterator

from files.models import PassageSubtype
from files.parsing.blocks import Block
from files.passage_data import PassageData

# Where to cut a window: the index of a whitespace character (> 0), or None
# when this kind of boundary is not in the window.
Finder = Callable[[str, int], int | None]

_NON_SPACE = re.compile(r"\S")
_LAST_SPACE = re.compile(r".*\s", re.DOTALL)
# Up to the last sentence end: . ! ? or … possibly followed by closing
# quotes or brackets, then whitespace (one backtracking match, no loop).
_LAST_SENTENCE_END = re.compile(r".*[.!?…][\"'”’»)\]]*\s", re.DOTALL)
# Whitespace other than a lone space: when absent, a paragraph is already
# collapsed and is left alone (the common case in clean text).
_NOT_A_SINGLE_SPACE = re.compile(r"\s{2,}|[^\S ]")
_WHITESPACE = re.compile(r"\s+")
_BLANK_LINES = re.compile(r"\n(?:[^\S\n]*\n)+")
# str.split() is the fastest collapse but holds every word at once; past this
# size a regular-expression substitution keeps memory proportional to the text.
_SPLIT_JOIN_LIMIT = 1 << 20


def _last_paragraph_break(window: str, max_length: int) -> int | None:
    index = window.rfind("\n\n")
    return index if index > 0 else None


def _last_line_break(window: str, max_length: int) -> int | None:
    index = window.rfind("\n")
    return index if index > 0 else None


def _last_sentence_end(window: str, max_length: int) -> int | None:
    # Only sentence ends in the second half count: cutting a 5,000-character
    # passage after its first sentence would make a needlessly small passage.
    # Without one there, a word boundary near the limit is better.
    match = _LAST_SENTENCE_END.match(window, max_length // 2)
    return match.end() - 1 if match else None


def _last_space(window: str, max_length: int) -> int | None:
    match = _LAST_SPACE.match(window)
    return match.end() - 1 if match and match.end() > 1 else None


_PROSE: tuple[Finder, ...] = (_last_sentence_end, _last_space)
_LINES: tuple[Finder, ...] = (_last_line_break, _last_space)
_FINDERS: dict[str, tuple[Finder, ...]] = {
    PassageSubtype.TITLE: _PROSE,
    PassageSubtype.SUBTITLE: _PROSE,
    PassageSubtype.PARAGRAPH: _PROSE,
    PassageSubtype.BLOCKQUOTE: (_last_paragraph_break, _last_line_break, *_PROSE),
    PassageSubtype.LIST: _LINES,
    PassageSubtype.TABLE: _LINES,
    PassageSubtype.CODE: _LINES,
}


def split_text(text: str, max_length: int, finders: tuple[Finder, ...]) -> Iterator[str]:
    """Stripped pieces of `text`, each at most `max_length` characters, cut at
    the first kind of boundary in `finders` found in the window; a
    whitespace-free run longer than `max_length` is cut into pieces of that length."""
    end = len(text)
    pos = 0
    while (start := _NON_SPACE.search(text, pos)) is not None:
        pos = start.start()
        if end - pos <= max_length:
            yield text[pos:].rstrip()
            return
        window = text[pos : pos + max_length + 1]
        cut = max_length
        for finder in finders:
            if (found := finder(window, max_length)) is not None:
                cut = found
                break
        yield window[:cut].rstrip()
        pos += cut


def collapse_whitespace(text: str) -> str:
    if _NOT_A_SINGLE_SPACE.search(text) is None:
        return text.strip()
    if len(text) < _SPLIT_JOIN_LIMIT:
        return " ".join(text.split())
    return _WHITESPACE.sub(" ", text).strip()


def _clean_lines(text: str) -> str:
    """Lines without trailing whitespace, blank lines dropped; indentation kept."""
    lines = (line.rstrip() for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def _clean_blockquote(text: str) -> str:
    parts = (_clean_lines(part) for part in _BLANK_LINES.split(text))
    return "\n\n".join(part for part in parts if part)


def _clean_code(text: str) -> str:
    lines = textwrap.dedent(text).splitlines()
    return "\n".join(line.rstrip() for line in lines).strip()


def normalized_text(subtype: str, text: str) -> str:
    """The text of a block as it will be stored: whitespace collapsed in prose,
    one item or row per line in lists and tables, code kept as written."""
    if subtype in (PassageSubtype.LIST, PassageSubtype.TABLE):
        return _clean_lines(text)
    if subtype == PassageSubtype.CODE:
        return _clean_code(text)
    if subtype == PassageSubtype.BLOCKQUOTE:
        return _clean_blockquote(text)
    return collapse_whitespace(text)


class _ParagraphRun:
    """Consecutive short paragraphs of one page, waiting to become one passage."""

    def __init__(self, max_length: int) -> None:
        self.max_length = max_length
        self.texts: list[str] = []
        self.length = 0
        self.page_number: int | None = None

    def fits(self, text: str, page_number: int | None) -> bool:
        if not self.texts:
            return True
        return page_number == self.page_number and self.length + 2 + len(text) <= self.max_length

    def add(self, text: str, page_number: int | None) -> None:
        self.length += len(text) + (2 if self.texts else 0)
        self.texts.append(text)
        self.page_number = page_number

    def take(self) -> str:
        content = "\n\n".join(self.texts)
        self.texts = []
        self.length = 0
        return content


def passages_from_blocks(
    blocks: Iterable[Block], *, max_length: int, source_url: str = ""
) -> list[PassageData]:
    """Passages in block order, each stripped, non-empty and at most
    `max_length` characters. Short consecutive paragraphs of a page share a
    passage (joined by a blank line); every other block starts its own."""
    passages: list[PassageData] = []
    run = _ParagraphRun(max_length)

    def flush() -> None:
        if run.texts:
            page_number = run.page_number
            passages.append(
                PassageData(content=run.take(), page_number=page_number, source_url=source_url)
            )

    for block in blocks:
        text = normalized_text(block.subtype, block.text)
        if not text:
            continue
        if block.subtype == PassageSubtype.PARAGRAPH and len(text) <= max_length:
            if not run.fits(text, block.page_number):
                flush()
            run.add(text, block.page_number)
            continue
        flush()
        finders = _FINDERS.get(block.subtype, (_last_space,))
        passages.extend(
            PassageData(
                content=piece,
                subtype=block.subtype,
                page_number=block.page_number,
                source_url=source_url,
            )
            for piece in split_text(text, max_length, finders)
        )
    flush()
    return passages
