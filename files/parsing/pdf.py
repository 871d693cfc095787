"""PDF through pypdf: lines with their font size become blocks, page by page.

pypdf reports each run of text with its matrices and font size; from them
each line gets a vertical position and a rendered size. The body size is the
size of most characters in the document. Lines at least 1.2 times the body
size are headings: those at the largest such size are titles, the others
subtitles; a wrapped heading (consecutive lines of one size) is one block,
and a "heading" longer than a few lines is a paragraph set in a large font.
Paragraphs end where the vertical gap between lines is clearly larger than
the document's usual line pitch. Blocks never span pages.
"""

import io
import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pypdf import PasswordType, PdfReader

from files.models import PassageSubtype
from files.parsing.blocks import Block
from files.parsing.errors import UnreadableDocument

logger = logging.getLogger(__name__)

_HEADING_RATIO = 1.2
_MAX_HEADING_LENGTH = 200
# A gap this much larger than the usual line pitch separates paragraphs.
_PARAGRAPH_GAP_RATIO = 1.3
# A wrapped heading's lines are closer than this many times its size.
_HEADING_LINE_GAP = 2.0
# The usual line pitch is the smallest gap (relative to the font size) seen
# between at least this share of consecutive body lines: paragraph gaps are
# larger, so they cannot be the smallest common one unless no paragraph wraps.
_PITCH_MIN_SHARE = 0.1
_HEADER_BYTES = 1024
_TRAILER_BYTES = 2048
_CHARACTER_FIXES = str.maketrans(
    {"\x00": None, "ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "st", "ﬆ": "st"}
)


@dataclass
class _Line:
    page_number: int
    y: float
    after_blank: bool
    parts: list[str] = field(default_factory=list)
    characters_by_size: Counter[float] = field(default_factory=Counter)

    @property
    def text(self) -> str:
        return "".join(self.parts).strip()

    @cached_property
    def size(self) -> float:
        """The size of most of the line's characters (read once the line is complete)."""
        return self.characters_by_size.most_common(1)[0][0]


class _LineCollector:
    """A `visitor_text` for pypdf's extract_text: gathers a page's lines."""

    def __init__(self, page_number: int) -> None:
        self.page_number = page_number
        self.lines: list[_Line] = []
        self.current: _Line | None = None
        self.blank_seen = False

    def __call__(self, text: Any, cm: Any, tm: Any, font: Any, font_size: Any) -> None:
        # The database cannot store NUL (some PDFs map glyphs to it), and
        # searches for "file" must find a "ﬁle" set with a ligature.
        pieces = str(text).translate(_CHARACTER_FIXES).split("\n")
        for index, piece in enumerate(pieces):
            if index:
                self._end_line()
            if piece.strip() or (piece and self.current is not None):
                self._append(piece, cm, tm, float(font_size or 0))

    def _append(
        self, piece: str, cm: Sequence[float], tm: Sequence[float], font_size: float
    ) -> None:
        if self.current is None:
            y = tm[4] * cm[1] + tm[5] * cm[3] + cm[5]
            self.current = _Line(self.page_number, y, after_blank=self.blank_seen)
            self.blank_seen = False
        # The rendered height of text is the font size scaled by the text
        # and transformation matrices (many PDFs set a 1 pt font and scale it).
        scale = math.hypot(tm[2] * cm[0] + tm[3] * cm[2], tm[2] * cm[1] + tm[3] * cm[3])
        size = round(font_size * scale * 2) / 2
        self.current.parts.append(piece)
        self.current.characters_by_size[size] += len(piece.strip())

    def _end_line(self) -> None:
        if self.current is None:
            self.blank_seen = True
        elif self.current.text:
            self.lines.append(self.current)
        self.current = None

    def finish(self) -> list[_Line]:
        self._end_line()
        return self.lines


def read_blocks(data: bytes) -> list[Block]:
    reader = _open(data)
    lines: list[_Line] = []
    for page_number in range(1, len(reader.pages) + 1):
        lines.extend(_page_lines(reader, page_number))
    if not lines:
        raise UnreadableDocument(
            "The PDF has no extractable text: scanned pages are images, and images are not "
            "read. Run text recognition (OCR) on it, or upload a version with text."
        )
    return _Layout(lines).blocks()


def _open(data: bytes) -> PdfReader:
    # pypdf raises many exception types on broken input (its own errors,
    # but also ValueError, KeyError, TypeError, RecursionError…), and
    # which one depends on where the damage is: all of them mean the same to
    # the uploader, so all are caught here, logged, and explained.
    try:
        reader = PdfReader(io.BytesIO(data))
        encrypted = reader.is_encrypted
    except Exception:
        logger.warning("Cannot read a PDF", exc_info=True)
        raise UnreadableDocument(_damage_reason(data)) from None
    if encrypted:
        try:
            opened = reader.decrypt("") != PasswordType.NOT_DECRYPTED
        except Exception:
            logger.warning("Cannot decrypt a PDF with the empty password", exc_info=True)
            opened = False
        if not opened:
            raise UnreadableDocument(
                "The PDF is encrypted: upload it without a password (in a PDF viewer, "
                "remove the password or print it to a new PDF)."
            )
    try:
        page_count = len(reader.pages)
    except Exception:
        logger.warning("Cannot read the pages of a PDF", exc_info=True)
        raise UnreadableDocument(_damage_reason(data)) from None
    if page_count == 0:
        raise UnreadableDocument("The PDF has no pages: check that you uploaded the right file.")
    return reader


def _damage_reason(data: bytes) -> str:
    if b"%PDF-" not in data[:_HEADER_BYTES]:
        return (
            "The file is not a PDF (it does not start with %PDF-): check that you uploaded "
            "the right file, or give its real type in contentType."
        )
    if b"%%EOF" not in data[-_TRAILER_BYTES:]:
        return (
            "The PDF is incomplete or damaged: it lacks the end-of-file marker, as a cut-off "
            "download or upload does. Upload the whole file again."
        )
    return (
        "The PDF is damaged and cannot be read: open it in a PDF viewer, save or print it "
        "to a new PDF, and upload that."
    )


def _page_lines(reader: PdfReader, page_number: int) -> list[_Line]:
    collector = _LineCollector(page_number)
    try:
        reader.pages[page_number - 1].extract_text(visitor_text=collector)
    except Exception:
        # Same reasoning as in _open: any exception here is damage in this page.
        logger.warning("Cannot extract the text of page %d of a PDF", page_number, exc_info=True)
        raise UnreadableDocument(
            f"Page {page_number} of the PDF is damaged and its text cannot be read: open the "
            "PDF in a viewer, save or print it to a new PDF, and upload that."
        ) from None
    return collector.finish()


class _Layout:
    """Sizes and spacing of a whole document, and the blocks they imply."""

    def __init__(self, lines: list[_Line]) -> None:
        self.lines = lines
        characters: Counter[float] = Counter()
        for line in lines:
            characters.update(line.characters_by_size)
        self.body_size = characters.most_common(1)[0][0]
        # Text of size 0 (invisible, or matrices that flatten it) has no
        # size to compare headings with.
        self.heading_size = self.body_size * _HEADING_RATIO if self.body_size > 0 else math.inf
        self.title_size = max(
            (size for size in characters if size >= self.heading_size), default=math.inf
        )
        self.pitch = self._line_pitch()

    def kind(self, line: _Line) -> str:
        if line.size >= self.title_size:
            return PassageSubtype.TITLE
        if line.size >= self.heading_size:
            return PassageSubtype.SUBTITLE
        return PassageSubtype.PARAGRAPH

    def _line_pitch(self) -> float | None:
        """The usual distance between two lines of a paragraph, in font sizes."""
        ratios: Counter[float] = Counter()
        for previous, line in zip(self.lines, self.lines[1:], strict=False):
            gap = previous.y - line.y
            if (
                line.page_number == previous.page_number
                and line.size == previous.size > 0
                and gap > 0
                and self.kind(line) == PassageSubtype.PARAGRAPH
            ):
                ratios[round(gap / line.size, 1)] += 1
        total = sum(ratios.values())
        common = [ratio for ratio, count in ratios.items() if count >= total * _PITCH_MIN_SHARE]
        return min(common, default=None)

    def _continues(self, previous: _Line, line: _Line, kind: str) -> bool:
        """Whether `line` continues the block that `previous` is in."""
        if (
            line.page_number != previous.page_number
            or line.after_blank
            or line.size != previous.size
            or kind != self.kind(previous)
        ):
            return False
        gap = previous.y - line.y
        if gap < 0:  # back up the page: a new column or a box
            return False
        if kind != PassageSubtype.PARAGRAPH:
            return gap <= line.size * _HEADING_LINE_GAP
        return self.pitch is None or gap <= self.pitch * line.size * _PARAGRAPH_GAP_RATIO

    def blocks(self) -> list[Block]:
        groups: list[list[_Line]] = []
        for line in self.lines:
            if groups and self._continues(groups[-1][-1], line, self.kind(line)):
                groups[-1].append(line)
            else:
                groups.append([line])
        return [self._block(group) for group in groups]

    def _block(self, lines: list[_Line]) -> Block:
        text = " ".join(line.text for line in lines)
        subtype = self.kind(lines[0]) if len(text) <= _MAX_HEADING_LENGTH else None
        return Block(subtype or PassageSubtype.PARAGRAPH, text, lines[0].page_number)
