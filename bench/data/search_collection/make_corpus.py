"""Regenerate corpus.jsonl from CPython's offline documentation topics.

Source: ``pydoc_data.topics.topics`` (a dict {topic: text}) shipped with
CPython; the committed corpus.jsonl was made with CPython 3.11.7 (PSF licence).

Each topic's text is split into paragraphs at blank lines; a paragraph's
wrapped lines are joined with single spaces; reST heading underlines are
dropped; paragraphs under 40 characters are dropped; a paragraph over
1,500 characters is cut at sentence ends into pieces of at most ~1,500.
Ids are ``<topic>-<n>`` with n the 0-based index of the kept paragraph within
its topic; the title is the topic name. Output is sorted by topic, then n,
so the file is deterministic for a given pydoc_data.

    .venv/bin/python bench/data/search_collection/make_corpus.py [OUT]
"""

import json
import pydoc_data.topics
import re
import sys
from collections.abc import Iterator
from pathlib import Path

MIN_CHARS = 40
MAX_CHARS = 1500
UNDERLINE = re.compile(r"^\s*([*=\-~^#])\1{2,}\s*$")
SENTENCE_END = re.compile(r"(?<=[.!?:])\s+(?=[A-Z\"“(0-9])")


def paragraphs(text: str) -> Iterator[str]:
    for block in re.split(r"\n\s*\n", text):
        lines = [ln.strip() for ln in block.splitlines() if not UNDERLINE.match(ln)]
        para = " ".join(ln for ln in lines if ln)
        para = re.sub(r"\s+", " ", para).strip()
        if len(para) < MIN_CHARS:
            continue
        yield from cap(para)


def cap(para: str) -> Iterator[str]:
    if len(para) <= MAX_CHARS:
        yield para
        return
    pieces: list[str] = []
    current = ""
    for sentence in SENTENCE_END.split(para):
        for part in hard_split(sentence):
            if current and len(current) + 1 + len(part) > MAX_CHARS:
                pieces.append(current)
                current = part
            else:
                current = f"{current} {part}" if current else part
    if current:
        pieces.append(current)
    for piece in pieces:
        if len(piece) >= MIN_CHARS:
            yield piece


def hard_split(sentence: str) -> Iterator[str]:
    """A single sentence longer than MAX_CHARS (e.g. a grammar) is cut at spaces."""
    while len(sentence) > MAX_CHARS:
        cut = sentence.rfind(" ", 0, MAX_CHARS)
        if cut <= 0:
            cut = MAX_CHARS
        yield sentence[:cut]
        sentence = sentence[cut:].lstrip()
    if sentence:
        yield sentence


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("corpus.jsonl")
    rows = []
    for topic in sorted(pydoc_data.topics.topics):
        for n, text in enumerate(paragraphs(pydoc_data.topics.topics[topic])):
            rows.append({"id": f"{topic}-{n}", "title": topic, "text": text})
    with out.open("w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(rows)} paragraphs from {len({r['title'] for r in rows})} topics -> {out}")


if __name__ == "__main__":
    main()
