"""Documents to index and the in-process Django that indexes them: seeded
English-like text and PDF pages (the same bytes every run), the project set
up in this process, a Celery queue of the run's own for the indexing task an
upload enqueues, an upload done the real way, and the passages indexed
checked against the document (positions, lengths, words, PDF structure)."""

from __future__ import annotations

import io
import os
import random
import re
import time
from dataclasses import dataclass
from typing import Any

from harness.project import Project
from harness.report import log

MB = 1024 * 1024
SEED = 20240611
TEXT_CONTENT_TYPE = "text/plain; charset=utf-8"
PDF_CONTENT_TYPE = "application/pdf"
SUBTITLE_EVERY = 4
# Characters of paragraphs per PDF page: make_pdf's A4 page holds about 3,500
# before it breaks onto a new page.
PDF_PAGE_CHARACTERS = 3_100


# ---------------------------------------------------------------- documents

_COMMON = (
    "the of and to in is that for it as with was on be by this are from at or an which have "
    "not they but all their more one has were been can other its would some into about these "
    "time only new also people may first any like such most now after two over very well "
    "what when where there then than them so because through during before between under "
    "while against without within each every both either neither much many few little own "
    "same different important small large great long short early late public private local "
    "general social political economic national human natural common simple certain clear "
    "system program question government number world company group problem service place "
    "case week point fact water money story month book night study word issue side kind head "
    "house friend power hour game line end member law car city community name president team "
    "minute idea kid body information back parent face others level office door health person "
    "art war history party result change morning reason research girl guy moment air teacher "
    "force education foot boy age policy music process market sense nation plan college "
    "interest death experience effect use class control care field development role effort "
    "rate heart drug show leader light voice wife police mind price report decision son view "
    "relationship town road arm difference value building action model season society tax "
    "director position player record paper space ground form event official matter center "
    "couple site project activity star table need court oil situation cost industry figure "
    "street image phone data picture practice piece land product doctor wall patient worker "
    "news test movie north love support technology step baby computer type attention film "
    "tree source organization hair window evidence population site network bot message file "
    "answer user webhook delivery signature retry passage document page index search query"
).split()
_ONSETS = ("b", "c", "d", "f", "g", "h", "l", "m", "n", "p", "r", "s", "t", "v", "w",
           "br", "cl", "dr", "fl", "gr", "pl", "pr", "sh", "st", "str", "th", "tr")  # fmt: skip
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ee", "ou", "oa", "io")
_CODAS = ("", "", "n", "r", "s", "t", "l", "m", "nd", "nt", "st", "ng", "ck", "rd")
_SUFFIXES = ("", "", "", "s", "ed", "ing", "er", "ly", "tion", "ment", "ness", "able")


def vocabulary(rng: random.Random, invented: int = 4_000) -> tuple[list[str], list[float]]:
    """Common English words plus invented English-sounding ones, with
    Zipf-like cumulative weights: a few words are very frequent, most rare."""
    words = list(dict.fromkeys(_COMMON))
    seen = set(words)
    while len(words) < len(_COMMON) + invented:
        word = "".join(
            rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
            for _ in range(rng.choice((1, 2, 2, 3)))
        ) + rng.choice(_SUFFIXES)
        if word not in seen:
            seen.add(word)
            words.append(word)
    cumulative: list[float] = []
    total = 0.0
    for rank in range(1, len(words) + 1):
        total += 1 / rank
        cumulative.append(total)
    return words, cumulative


class Prose:
    """Seeded English-like sentences and paragraphs."""

    def __init__(self, seed: int = SEED) -> None:
        self.rng = random.Random(seed)
        self.words, self.weights = vocabulary(self.rng)

    def sentence(self) -> str:
        rng = self.rng
        words = rng.choices(self.words, cum_weights=self.weights, k=rng.randint(5, 22))
        if len(words) > 8 and rng.random() < 0.4:
            comma = rng.randint(3, len(words) - 3)
            words[comma] += ","
        ending = rng.choices((".", "?", "!", ";"), weights=(90, 5, 3, 2))[0]
        first = words[0]
        words[0] = first[0].upper() + first[1:]
        return " ".join(words) + ending

    def paragraph(self, sentences: int) -> str:
        return " ".join(self.sentence() for _ in range(sentences))

    def text_paragraph(self) -> str:
        rng = self.rng
        long = rng.random() < 0.1
        text = self.paragraph(rng.randint(12, 30) if long else rng.randint(2, 8))
        if rng.random() < 1 / 3:
            # Hard-wrapped, as many plain-text files are: a newline every ~12 words.
            words = text.split(" ")
            lines = [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]
            text = "\n".join(lines)
        return text


def english_text(size: int, seed: int = SEED) -> bytes:
    """About `size` bytes (a little more, to end on a whole paragraph) of
    UTF-8 plain text: paragraphs separated by blank lines."""
    prose = Prose(seed)
    parts: list[str] = []
    length = 0
    while length < size:
        paragraph = prose.text_paragraph()
        parts.append(paragraph)
        length += len(paragraph) + 2
    return ("\n\n".join(parts) + "\n").encode()


def pdf_pages(count: int, seed: int = SEED) -> list[list[tuple[Any, str]]]:
    """Pages for make_pdf: a title on page 1, a subtitle every SUBTITLE_EVERY
    pages, paragraphs of 2-8 sentences filling each page without overflowing it."""
    prose = Prose(seed + 1)
    pages: list[list[tuple[Any, str]]] = []
    for number in range(1, count + 1):
        page: list[tuple[Any, str]] = []
        used = 0
        if number == 1:
            page.append(("title", "Operating a bot platform: a field guide"))
            used += 400
        elif number % SUBTITLE_EVERY == 1:
            page.append(("subtitle", f"Part {number // SUBTITLE_EVERY}: {prose.sentence()[:60]}"))
            used += 200
        while True:
            paragraph = prose.paragraph(prose.rng.randint(2, 8))
            if used + len(paragraph) > PDF_PAGE_CHARACTERS:
                break
            page.append(("paragraph", paragraph))
            used += len(paragraph) + 120  # the gap after a paragraph takes about a line
        pages.append(page)
    return pages


# ---------------------------------------------------------------- the run's queue, uploads


def indexing_queue() -> str:
    """The Celery queue of this run: set before the project is seeded, so that
    every process of the run (seed_demo too) publishes there, not to the
    default queue."""
    queue = f"bench-indexing-{os.getpid()}"
    os.environ["CELERY_QUEUE"] = queue
    return queue


def drop_queue(queue: str) -> int:
    """Purge and delete the run's queue; answers how many messages it held."""
    from platform_site.celery import app

    with app.connection_for_write() as conn:
        bound = app.amqp.queues[queue](conn.default_channel)
        bound.declare()
        purged = bound.purge() or 0
        bound.delete()
    return int(purged)


def upload(*, bot: Any, key: str, data: bytes, content_type: str) -> Any:
    """A file announced and uploaded the real way; it is left indexing_pending."""
    from files.services.file_uploads import file_upload_receive
    from files.services.files import file_upsert
    from files.signed_urls import UploadGrant

    file = file_upsert(bot=bot, key=key, size=len(data), content_type=content_type, index=True)
    return file_upload_receive(
        grant=UploadGrant(file_id=file.id, upload_id=file.upload_id),
        body=io.BytesIO(data),
        length=len(data),
        content_type=content_type,
    )


@dataclass
class Documents:
    """The documents of an indexing run: text, and a PDF made of `pages`."""

    text: bytes
    pages: list[list[tuple[Any, str]]]
    pdf: bytes


def make_documents(text_mb: float, pdf_pages_count: int) -> Documents:
    """`text_mb` MB of text and a PDF of `pdf_pages_count` pages
    (tests/documents.make_pdf), described on stdout."""
    log(f"generating {text_mb:g} MB of text and a {pdf_pages_count}-page PDF")
    started = time.perf_counter()
    text_bytes = english_text(int(text_mb * MB))
    pages = pdf_pages(pdf_pages_count)
    from tests.documents import make_pdf

    pdf_bytes = make_pdf(pages)
    paragraphs = text_bytes.count(b"\n\n") + 1
    print(
        f"documents (made in {time.perf_counter() - started:.1f} s): text"
        f" {len(text_bytes):,} bytes, {paragraphs:,} paragraphs;"
        f" PDF {len(pdf_bytes):,} bytes, {len(pages)} pages,"
        f" {sum(len(t) for page in pages for _, t in page):,} characters of text"
    )
    return Documents(text_bytes, pages, pdf_bytes)


def passages_vacuum(proj: Project, *, analyze: bool = False) -> None:
    """Not timed: VACUUM of the passages (and ANALYZE) and a CHECKPOINT, so that
    what comes next pays for no earlier run's dead rows or dirty buffers."""
    with proj.connect(autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) files_passage" if analyze else "VACUUM files_passage")
        conn.execute("CHECKPOINT")


# ---------------------------------------------------------------- indexed passages


def stored_passages(file_id: str) -> list[tuple[int, str, str, int | None]]:
    from files.models import Passage

    return list(
        Passage.objects.filter(file_id=file_id)
        .order_by("position")
        .values_list("position", "content", "subtype", "page_number")
    )


_SPACES = re.compile(r"\s+")


def words_of(text: str) -> str:
    """The words of `text` separated by single spaces (one string: a list
    of 8 million words would take half a gigabyte)."""
    return _SPACES.sub(" ", text).strip()


def check_passages(
    file_id: str, expected_words: str, max_length: int, failures: list[str], label: str
) -> list[tuple[int, str, str, int | None]]:
    rows = stored_passages(file_id)
    positions = [row[0] for row in rows]
    if positions != list(range(len(rows))):
        failures.append(f"{label}: positions are not 0..{len(rows) - 1}")
    too_long = sum(1 for row in rows if len(row[1]) > max_length)
    if too_long:
        failures.append(f"{label}: {too_long} passages longer than {max_length} characters")
    words = words_of(" ".join(row[1] for row in rows))
    if words != expected_words:
        at = next(
            (
                i
                for i in range(0, len(words), 4096)
                if words[i : i + 4096] != expected_words[i : i + 4096]
            ),
            0,
        )
        failures.append(
            f"{label}: the passages' words differ from the document's near character {at:,}"
            f" ({words[at : at + 80]!r} vs {expected_words[at : at + 80]!r});"
            f" {len(words):,} characters against {len(expected_words):,}"
        )
    return rows


def check_pdf_structure(
    rows: list[tuple[int, str, str, int | None]],
    pages: list[list[tuple[Any, str]]],
    failures: list[str],
) -> None:
    expected = [
        (kind, " ".join(text.split()), number)
        for number, page in enumerate(pages, start=1)
        for kind, text in page
        if kind != "paragraph"
    ]
    found = [
        (subtype, content, page) for _, content, subtype, page in rows if subtype != "paragraph"
    ]
    if found != expected:
        failures.append(
            f"pdf: {len(found)} title/subtitle passages, expected {len(expected)};"
            f" first difference: "
            + next(
                (f"{a} vs {b}" for a, b in zip(found, expected, strict=False) if a != b),
                "(one list is a prefix of the other)",
            )
        )
    numbers = sorted({row[3] for row in rows if row[3] is not None})
    if numbers != list(range(1, len(pages) + 1)):
        failures.append(f"pdf: passages' page numbers are not 1..{len(pages)}")
