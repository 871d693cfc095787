"""Builders of real documents as bytes, for parsing tests, API tests and benchmarks."""

from collections.abc import Sequence
from typing import Literal

from fpdf import FPDF

PdfKind = Literal["title", "subtitle", "paragraph"]
PdfPage = Sequence[tuple[PdfKind, str]]

# Font size in points and line height in millimetres of each kind of block.
# Paragraphs are followed by a gap of half a line so that a reader can tell
# two paragraphs apart by the vertical space between them, as in real documents.
_PDF_STYLES: dict[PdfKind, tuple[float, float]] = {
    "title": (24, 12),
    "subtitle": (16, 9),
    "paragraph": (11, 5.5),
}
_PARAGRAPH_GAP_MM = 3


def make_pdf(pages: Sequence[PdfPage]) -> bytes:
    """A PDF with one page per item of `pages`; each page lists (kind, text)
    blocks with kind "title" (24 pt), "subtitle" (16 pt) or "paragraph"
    (11 pt, wrapped to the page width). Text must be Latin-1 (core fonts)."""
    pdf = FPDF()
    pdf.set_auto_page_break(auto=True, margin=15)
    for page in pages:
        pdf.add_page()
        for kind, text in page:
            size, line_height = _PDF_STYLES[kind]
            pdf.set_font("Helvetica", style="" if kind == "paragraph" else "B", size=size)
            pdf.multi_cell(0, line_height, text, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(_PARAGRAPH_GAP_MM)
    return bytes(pdf.output())


def encrypted_pdf() -> bytes:
    """A PDF that only opens with a user password."""
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.multi_cell(0, 5.5, "Secret content.")
    pdf.set_encryption(owner_password="owner-secret", user_password="user-secret")
    return bytes(pdf.output())


def truncated_pdf() -> bytes:
    """A valid PDF cut in half, as an interrupted upload leaves it."""
    whole = make_pdf([[("paragraph", "Some text on a page. " * 40)]] * 3)
    return whole[: len(whole) // 2]


def garbage_pdf() -> bytes:
    """A PDF header followed by nothing a PDF reader can use."""
    return b"%PDF-1.7\n garbage that is not a PDF body at all\n"


def corrupt_pdf() -> bytes:
    return truncated_pdf()


def make_markdown(sections: Sequence[tuple[str, Sequence[str]]]) -> str:
    """Markdown with an h1 per section name and its paragraphs."""
    parts: list[str] = []
    for heading, paragraphs in sections:
        parts.append(f"# {heading}")
        parts.extend(paragraphs)
    return "\n\n".join(parts) + "\n"


def make_html(body: str, *, head: str = "") -> bytes:
    """A complete UTF-8 HTML document around `body`."""
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8">{head}</head>'
        f"<body>{body}</body></html>\n"
    ).encode()
