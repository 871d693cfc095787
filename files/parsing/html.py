"""HTML through selectolax (lexbor): the body's structure becomes blocks.

h1 → title, h2–h6 → subtitle, p → paragraph, ul/ol → list, table → table,
pre → code, blockquote → blockquote. Text directly in other containers (div,
section, td-less bodies…) becomes paragraphs, one per run of text between
block-level elements. The head's <title> is a title passage, placed first,
only when the body has no h1: pages often repeat the h1 in <title> with the
site's name appended, which would index the same heading twice.
"""

from collections.abc import Iterator
from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser, LexborNode

from files.models import PassageSubtype
from files.parsing.blocks import Block
from files.parsing.chunking import collapse_whitespace, normalized_text

# Content that is not document text: code, styles, fallbacks for disabled
# scripts, inert templates, embedded graphics, and form controls (their
# labels and option lists read as noise between paragraphs).
_IGNORED_TAGS = [
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "math",
    "iframe",
    "object",
    "canvas",
    "select",
    "datalist",
    "button",
    "textarea",
]
_HEADINGS = {
    "h1": PassageSubtype.TITLE,
    **{f"h{level}": PassageSubtype.SUBTITLE for level in range(2, 7)},
}
_LISTS = frozenset({"ul", "ol", "menu"})
_CELLS = frozenset({"td", "th"})
# Elements whose text flows within the surrounding line; any other element
# starts a new block (or, inside a block, separates words).
_INLINE_TAGS = frozenset(
    {
        "a",
        "abbr",
        "b",
        "bdi",
        "bdo",
        "cite",
        "code",
        "data",
        "del",
        "dfn",
        "em",
        "font",
        "i",
        "ins",
        "kbd",
        "label",
        "mark",
        "q",
        "s",
        "samp",
        "small",
        "span",
        "strike",
        "strong",
        "sub",
        "sup",
        "time",
        "tt",
        "u",
        "var",
        "wbr",
    }
)
# Blockquotes and lists nested deeper than this are read as plain containers,
# so hostile markup cannot exhaust the recursion limit.
_MAX_NESTING = 32


@dataclass(frozen=True)
class HtmlDocument:
    blocks: list[Block]
    canonical_url: str


def read_html(text: str) -> HtmlDocument:
    tree = LexborHTMLParser(text)
    canonical_url = _canonical_url(tree)
    title_node = tree.head.css_first("title") if tree.head else None
    title = collapse_whitespace(title_node.text()) if title_node else ""
    tree.strip_tags(_IGNORED_TAGS, recursive=True)
    blocks = _BlockWalker(depth=0).walk(tree.body) if tree.body else []
    if title and not any(block.subtype == PassageSubtype.TITLE for block in blocks):
        blocks.insert(0, Block(PassageSubtype.TITLE, title))
    return HtmlDocument(blocks=blocks, canonical_url=canonical_url)


def _canonical_url(tree: LexborHTMLParser) -> str:
    for link in tree.css("link[rel][href]"):
        relations = (link.attributes.get("rel") or "").lower().split()
        href = (link.attributes.get("href") or "").strip()
        if "canonical" in relations and href.lower().startswith(("http://", "https://")):
            return href
    return ""


def _inline_text(node: LexborNode) -> str:
    """All text under `node`; block-level elements and <br> separate words."""
    parts: list[str] = []
    for descendant in node.traverse(include_text=True):
        if descendant.is_text_node:
            parts.append(descendant.text_content or "")
        elif descendant.is_element_node and descendant.tag not in _INLINE_TAGS:
            parts.append(" ")
    return "".join(parts)


class _BlockWalker:
    def __init__(self, *, depth: int) -> None:
        self.depth = depth
        self.blocks: list[Block] = []
        self.pending_text: list[str] = []

    def walk(self, root: LexborNode) -> list[Block]:
        # An explicit stack rather than recursion: real pages nest divs
        # hundreds deep. Each entry is (children left, whether the element is
        # a block whose end closes the current paragraph).
        stack: list[tuple[Iterator[LexborNode], bool]] = [(root.iter(include_text=True), True)]
        while stack:
            children, is_block = stack[-1]
            node = next(children, None)
            if node is None:
                stack.pop()
                if is_block:
                    self._flush_text()
            elif node.is_text_node:
                self.pending_text.append(node.text_content or "")
            elif not node.is_element_node or node.tag in _IGNORED_TAGS:
                continue
            elif node.tag == "br":
                self.pending_text.append("\n")
            elif node.tag in _INLINE_TAGS:
                stack.append((node.iter(include_text=True), False))
            elif not self._read_structure(node):
                self._flush_text()
                stack.append((node.iter(include_text=True), True))
        self._flush_text()
        return self.blocks

    def _flush_text(self) -> None:
        text = "".join(self.pending_text)
        self.pending_text = []
        self._add(PassageSubtype.PARAGRAPH, text)

    def _add(self, subtype: str, text: str) -> None:
        if text and not text.isspace():
            self.blocks.append(Block(subtype, text))

    def _read_structure(self, node: LexborNode) -> bool:
        """Add the block that `node` is, if it is one of the structural elements."""
        tag = node.tag or ""
        nested_too_deep = self.depth >= _MAX_NESTING
        if tag in _HEADINGS:
            subtype = _HEADINGS[tag]
            text = _inline_text(node)
        elif tag == "p":
            subtype, text = PassageSubtype.PARAGRAPH, _inline_text(node)
        elif tag == "pre":
            subtype, text = PassageSubtype.CODE, node.text(deep=True)
        elif tag in _LISTS and not nested_too_deep:
            subtype, text = PassageSubtype.LIST, "\n".join(_list_lines(node, depth=0))
        elif tag == "table":
            self._flush_text()
            for child in node.iter():
                if child.tag == "caption":
                    self._add(PassageSubtype.PARAGRAPH, _inline_text(child))
            subtype, text = PassageSubtype.TABLE, "\n".join(_table_rows(node))
        elif tag == "blockquote" and not nested_too_deep:
            inner = _BlockWalker(depth=self.depth + 1).walk(node)
            subtype = PassageSubtype.BLOCKQUOTE
            text = "\n\n".join(normalized_text(block.subtype, block.text) for block in inner)
        else:
            return False
        self._flush_text()
        self._add(subtype, text)
        return True


def _list_lines(node: LexborNode, *, depth: int) -> list[str]:
    """One line per item ("- item" or "3. item"), nested lists indented."""
    ordered = node.tag == "ol"
    number = _list_start(node)
    indent = "  " * depth
    lines: list[str] = []
    for item in node.iter():
        if item.tag in _LISTS and depth < _MAX_NESTING:
            # <ul> directly inside <ul>: invalid but common; a nested list.
            lines.extend(_list_lines(item, depth=depth + 1))
            continue
        words: list[str] = []
        nested: list[str] = []
        for part in item.iter(include_text=True):
            if part.is_text_node:
                words.append(part.text_content or "")
            elif part.is_element_node and part.tag in _LISTS and depth < _MAX_NESTING:
                nested.extend(_list_lines(part, depth=depth + 1))
            elif part.is_element_node:
                words.append(_inline_text(part))
        text = collapse_whitespace("".join(words))
        if text:
            lines.append(f"{indent}{number}. {text}" if ordered else f"{indent}- {text}")
            number += 1
        lines.extend(nested)
    return lines


def _list_start(node: LexborNode) -> int:
    start = (node.attributes.get("start") or "1").strip()
    return int(start) if start.lstrip("-").isdigit() and len(start) < 10 else 1


def _table_rows(table: LexborNode) -> list[str]:
    """One line per row of `table` (not of tables nested in its cells), cells joined by " | "."""
    rows: list[str] = []
    for row in table.css("tr"):
        if _enclosing_table_id(row) != table.mem_id:
            continue
        cells = [
            collapse_whitespace(_inline_text(cell)) for cell in row.iter() if cell.tag in _CELLS
        ]
        if any(cells):
            rows.append(" | ".join(cells).rstrip())
    return rows


def _enclosing_table_id(node: LexborNode) -> int | None:
    parent = node.parent
    while parent is not None and parent.tag != "table":
        parent = parent.parent
    return parent.mem_id if parent is not None else None
