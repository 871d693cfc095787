"""Markdown through markdown-it-py (CommonMark with GFM tables) tokens.

h1 → title, h2–h6 → subtitle, paragraphs, lists, tables, fenced and indented
code, blockquotes. Inline markup keeps its text (link text, emphasised words,
inline code) and drops its characters; images are dropped (alt text is a
label for a picture, not prose). Raw HTML blocks are read as HTML.

A token stream takes about ten times the memory of its source, so a large
file is parsed in sections of about a megabyte cut where a new top-level block
must start; only the tokens of one section exist at a time.
"""

import re
from collections.abc import Iterator, MutableMapping
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import normalizeReference
from markdown_it.token import Token

from files.models import PassageSubtype
from files.parsing.blocks import Block
from files.parsing.chunking import collapse_whitespace, normalized_text
from files.parsing.html import read_html

_PARSER = MarkdownIt("commonmark", {"html": True}).enable("table")
_LIST_OPENS = frozenset({"bullet_list_open", "ordered_list_open"})
_CODE_TOKENS = frozenset({"fence", "code_block"})

_SECTION_SIZE = 1 << 20
_FRONT_MATTER_MAX = 64 * 1024
# A blank line followed by a line at column 0 that cannot continue a list,
# a blockquote, a table or indented code, nor open raw HTML: a new top-level
# block starts there, whatever came before (fences and raw HTML aside).
_SECTION_BREAK = re.compile(r"\n[^\S\n]*\n(?=[^\s\-+*>|<\[`~0-9])")
# What can make a blank line part of a block: fences, and HTML blocks that
# only end at their closing tag or comment end.
_LONG_CONSTRUCTS = re.compile(
    r"^ {0,3}(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)$"
    r"|^ {0,3}<(?P<raw>pre|script|style|textarea)(?=[\s>]|$)"
    r"|^ {0,3}(?P<comment><!--)"
    r"|</(?P<raw_end>pre|script|style|textarea)>"
    r"|(?P<comment_end>-->)",
    re.MULTILINE | re.IGNORECASE,
)
# YAML front matter (static-site generators put it first): metadata, not
# text, and CommonMark would read its closing --- as a setext heading
# underline. Only a block whose first line is a "key:" counts.
_FRONT_MATTER = re.compile(
    r"\A---[ \t]*\r?\n[A-Za-z_][\w-]*[ \t]*:.*?^(?:---|\.\.\.)[ \t]*$", re.M | re.S
)
_REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[((?:[^\[\]\\\n]|\\.){1,999})\]:", re.MULTILINE)


def read_blocks(text: str) -> Iterator[Block]:
    front_matter = _FRONT_MATTER.match(text[:_FRONT_MATTER_MAX])
    if front_matter:
        text = text[front_matter.end() :]
    env: MutableMapping[str, Any] = {}
    if len(text) > _SECTION_SIZE:
        # A reference link may be defined in another section; its text is
        # all we keep, so knowing the label is enough for it to read as a link.
        env["references"] = {
            normalizeReference(match.group(1)): {"title": "", "href": "", "map": None}
            for match in _REFERENCE_DEFINITION.finditer(text)
        }
    for section in _sections(text):
        yield from _blocks(_PARSER.parse(section, env))


class _ConstructTracker:
    """Whether a position of the text is inside a fence or a raw HTML block,
    scanning forward only, so a whole file is scanned once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.position = 0
        self.fence = ""
        self.raw_end = ""

    def inside_at(self, position: int) -> bool:
        for match in _LONG_CONSTRUCTS.finditer(self.text, self.position, position):
            fence = match.group("fence")
            if self.fence:
                if (
                    fence
                    and fence[0] == self.fence[0]
                    and len(fence) >= len(self.fence)
                    and not match.group("info").strip()
                ):
                    self.fence = ""
            elif self.raw_end:
                end = match.group("raw_end") or match.group("comment_end") or ""
                if end.lower() == self.raw_end:
                    self.raw_end = ""
            elif fence:
                # A backtick fence's info string cannot hold a backtick: that
                # line is inline code, not a fence.
                if not (fence[0] == "`" and "`" in match.group("info")):
                    self.fence = fence
            elif match.group("raw"):
                self.raw_end = match.group("raw").lower()
            elif match.group("comment"):
                self.raw_end = "-->"
        self.position = position
        return bool(self.fence or self.raw_end)


def _sections(text: str) -> Iterator[str]:
    tracker = _ConstructTracker(text)
    start = 0
    while len(text) - start > _SECTION_SIZE:
        cut = next(
            (
                candidate.end()
                for candidate in _SECTION_BREAK.finditer(text, start + _SECTION_SIZE)
                if not tracker.inside_at(candidate.end())
            ),
            None,
        )
        if cut is None:
            break
        yield text[start:cut]
        start = cut
    yield text[start:]


def _closing_index(tokens: list[Token], opening: int) -> int:
    level = tokens[opening].level
    index = opening + 1
    while not (tokens[index].nesting == -1 and tokens[index].level == level):
        index += 1
    return index


def _blocks(tokens: list[Token]) -> Iterator[Block]:
    index = 0
    while index < len(tokens):
        token = tokens[index]
        end = _closing_index(tokens, index) if token.nesting == 1 else index
        if token.type == "heading_open":
            subtype = PassageSubtype.TITLE if token.tag == "h1" else PassageSubtype.SUBTITLE
            yield Block(subtype, _inline_texts(tokens[index + 1 : end]))
        elif token.type == "paragraph_open":
            yield Block(PassageSubtype.PARAGRAPH, _inline_texts(tokens[index + 1 : end]))
        elif token.type in _LIST_OPENS:
            yield Block(PassageSubtype.LIST, "\n".join(_list_lines(tokens, index, end, depth=0)))
        elif token.type == "table_open":
            yield Block(PassageSubtype.TABLE, "\n".join(_table_rows(tokens[index + 1 : end])))
        elif token.type in _CODE_TOKENS:
            yield Block(PassageSubtype.CODE, token.content)
        elif token.type == "html_block":
            yield from read_html(token.content).blocks
        elif token.type == "blockquote_open":
            inner = _blocks(tokens[index + 1 : end])
            text = "\n\n".join(normalized_text(block.subtype, block.text) for block in inner)
            yield Block(PassageSubtype.BLOCKQUOTE, text)
        elif token.nesting == 1:
            yield from _blocks(tokens[index + 1 : end])
        index = end + 1


def _inline_text(token: Token) -> str:
    parts: list[str] = []
    for child in token.children or ():
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak") or (
            child.type == "html_inline" and child.content[:3].lower() == "<br"
        ):
            parts.append(" ")
    return "".join(parts)


def _inline_texts(tokens: list[Token]) -> str:
    return " ".join(_inline_text(token) for token in tokens if token.type == "inline")


def _list_lines(tokens: list[Token], opening: int, closing: int, *, depth: int) -> list[str]:
    """One line per item ("- item" or "3. item"), nested lists indented.
    markdown-it caps nesting (maxNesting), which bounds the recursion."""
    ordered = tokens[opening].type == "ordered_list_open"
    number = int(tokens[opening].attrGet("start") or 1)
    indent = "  " * depth
    lines: list[str] = []
    item = opening + 1
    while item < closing:
        item_end = _closing_index(tokens, item)
        words: list[str] = []
        nested: list[str] = []
        index = item + 1
        while index < item_end:
            token = tokens[index]
            if token.type in _LIST_OPENS:
                nested_end = _closing_index(tokens, index)
                nested.extend(_list_lines(tokens, index, nested_end, depth=depth + 1))
                index = nested_end
            elif token.type == "inline":
                words.append(_inline_text(token))
            elif token.type in _CODE_TOKENS:
                words.append(token.content)
            elif token.type == "html_block":
                words.extend(block.text for block in read_html(token.content).blocks)
            index += 1
        text = collapse_whitespace(" ".join(words))
        if text:
            lines.append(f"{indent}{number}. {text}" if ordered else f"{indent}- {text}")
            number += 1
        lines.extend(nested)
        item = item_end + 1
    return lines


def _table_rows(tokens: list[Token]) -> list[str]:
    rows: list[str] = []
    cells: list[str] = []
    for token in tokens:
        if token.type == "tr_open":
            cells = []
        elif token.type == "inline":
            cells.append(collapse_whitespace(_inline_text(token)))
        elif token.type == "tr_close" and any(cells):
            rows.append(" | ".join(cells).rstrip())
    return rows
