"""Indexing throughput: a 50 MB plain-text file and a 300-page PDF through
files.indexing.file_index, against floors measured in the same run.

    .venv/bin/python bench/indexing.py [--text-mb 50 --pdf-pages 300 --repeats 3]

1. A fresh database bench_indexing, migrated and seeded (a bot), and a
   DATA_DIR of the run under /tmp: the files storage is a folder in it.
2. The documents, generated (seeded, so every run indexes the same bytes):
   - text: English-like words, paragraphs of 2-8 sentences separated by blank
     lines, one in ten a long paragraph of 12-30 sentences (over 1,000
     characters), one in three hard-wrapped at about 12 words a line;
   - PDF: tests/documents.make_pdf, a title on page 1, a subtitle every 4
     pages, paragraphs filling every page.
3. Each document is uploaded the real way (files.services.file_upsert with
   index=True, then files.uploads.file_upload_receive, which stores the bytes
   and leaves the file indexing_pending), then indexed --repeats times: run 1
   right after the upload, the others after files.services.file_reindex. Each
   timed run is file_index(file_id=..., revision=...) called in-process, with
   its split (read from storage, parse, delete the old passages, insert the
   new ones, the rest of the final transaction with its commit) taken by
   stopwatches around the functions file_index calls, and the CPU of this
   process and of PostgreSQL. Before each timed write phase: VACUUM of the
   passages table and a CHECKPOINT (not timed), so that no run pays for the
   previous one's dead rows or dirty buffers.
4. In the same rounds, interleaved (the order rotates each round):
   - parse alone: files.parsing.extract_passages on the same bytes;
   - text floor: decode the bytes, cut the text into as many equal slices as
     file_index made passages, and COPY those rows (psg_ + ULID ids, as the
     application makes them) into files_passage with psycopg, replacing the
     previous floor rows in one transaction, committed;
   - PDF floor: pypdf alone, PdfReader(...).pages[i].extract_text() over all
     pages.
5. Checks (exit 1 if one fails): every run completed, positions 0..N-1, each
   passage at most the maximum length, the passages' words are the
   document's words in order, the PDF has the pages asked for and its title
   and subtitles come out as such, on their pages.

Ratios (reported, never asserted): file_index MB/s / floor MB/s (text), and
file_index MB/s / pypdf-alone MB/s (PDF). Medians of --repeats.

Celery: file_upload_receive and file_reindex enqueue the indexing task once
they commit. This process publishes it to Redis database 15 (BENCH_REDIS_URL),
on a queue of the run's own (CELERY_QUEUE=bench-indexing-<pid>) that no
worker consumes; the queue is purged and deleted at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import re
import resource
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

sys.path.insert(1, str(benchlib.ROOT))  # tests.documents (make_pdf)

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


# ---------------------------------------------------------------- in-process Django


def django_setup(proj: benchlib.Project) -> None:
    os.environ.update(proj.env)
    import django

    django.setup(set_prefix=False)


def run_queue() -> str:
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
    from files.services import file_upsert
    from files.signed_urls import UploadGrant
    from files.uploads import file_upload_receive

    file = file_upsert(bot=bot, key=key, size=len(data), content_type=content_type, index=True)
    return file_upload_receive(
        grant=UploadGrant(file_id=file.id, upload_id=file.upload_id),
        body=io.BytesIO(data),
        length=len(data),
        content_type=content_type,
    )


@contextlib.contextmanager
def stopwatches(targets: Sequence[tuple[Any, str, str]]) -> Iterator[dict[str, float]]:
    """While inside, each function `module.name` is wrapped to add its wall
    time to the answered dict under `label`; put back on the way out."""
    spent: dict[str, float] = {label: 0.0 for _, _, label in targets}
    originals = []
    for module, name, label in targets:
        original = getattr(module, name)
        originals.append((module, name, original))

        def timed(*args: Any, _original: Any = original, _label: str = label, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                spent[_label] += time.perf_counter() - started

        setattr(module, name, timed)
    try:
        yield spent
    finally:
        for module, name, original in originals:
            setattr(module, name, original)


class Quiet:
    """benchlib.wait_for_quiet before each phase, remembering the background
    load it saw last (cores), to print beside the figures."""

    def __init__(self, max_wait: float) -> None:
        self.max_wait = max_wait
        self.seen: list[float] = []

    def wait(self) -> None:
        self.seen.append(benchlib.wait_for_quiet(max_wait=self.max_wait))


@dataclass
class IndexRun:
    total: float
    parts: dict[str, float]
    passages: int
    python_cpu: float
    postgres_cpu: float
    # Cores busy outside this process and PostgreSQL during the run (background).
    other_cores: float

    @property
    def other(self) -> float:
        return self.total - self.parts["read"] - self.parts["parse"] - self.parts["finish"]

    @property
    def insert(self) -> float:
        return self.parts["write"] - self.parts["delete"]

    @property
    def commit_and_rest(self) -> float:
        """The final transaction minus the passages' replacement: lock, save, commit."""
        return self.parts["finish"] - self.parts["write"]


def maintenance(proj: benchlib.Project) -> None:
    """Not timed: clear the previous run's dead rows and dirty buffers."""
    with proj.connect(autocommit=True) as conn:
        conn.execute("VACUUM files_passage")
        conn.execute("CHECKPOINT")


def index_once(file_id: str, *, reindex: bool) -> IndexRun:
    """file_index of the file (after file_reindex when `reindex`), timed, with its split."""
    from files import indexing, services
    from files.indexing import IndexingOutcome, file_index
    from files.models import File, FileStatus, Passage

    file = File.objects.get(id=file_id)
    if reindex:
        file = services.file_reindex(file=file)
    if file.status != FileStatus.INDEXING_PENDING:
        raise RuntimeError(f"{file_id} is {file.status}, not indexing_pending")
    targets = [
        (indexing, "blob_read", "read"),
        (indexing, "extract_passages", "parse"),
        (indexing, "_finish", "finish"),
        (indexing, "passages_replace", "write"),
        (services, "passages_clear", "delete"),
    ]
    with stopwatches(targets) as parts:
        before = benchlib.cpu_snapshot()
        started_cpu = time.process_time()
        started = time.perf_counter()
        outcome = file_index(file_id=file.id, revision=file.revision)
        total = time.perf_counter() - started
        python_cpu = time.process_time() - started_cpu
        after = benchlib.cpu_snapshot()
    if outcome != IndexingOutcome.COMPLETED:
        file.refresh_from_db()
        raise RuntimeError(f"indexing {file_id}: {outcome} ({file.failed_status_reason})")
    postgres_cpu = after.by_group["postgres"] - before.by_group["postgres"]
    machine = after.machine_busy - before.machine_busy
    return IndexRun(
        total=total,
        parts=dict(parts),
        passages=Passage.objects.filter(file_id=file_id).count(),
        python_cpu=python_cpu,
        postgres_cpu=postgres_cpu,
        other_cores=max(machine - python_cpu - postgres_cpu, 0.0) / total,
    )


def parse_alone(data: bytes, content_type: str) -> tuple[float, int]:
    from django.conf import settings

    from files.parsing import extract_passages

    started = time.perf_counter()
    passages = extract_passages(
        data, content_type=content_type, max_length=settings.FILE_PASSAGE_MAX_LENGTH
    )
    return time.perf_counter() - started, len(passages)


def text_floor(proj: benchlib.Project, data: bytes, chunks: int, file_id: str) -> float:
    """Decode, cut into `chunks` equal slices, replace the floor file's rows
    with them by COPY in one transaction: the least any indexing must do."""
    from ulid import ULID

    with proj.connect() as conn:
        started = time.perf_counter()
        text = data.decode("utf-8")
        bounds = [len(text) * i // chunks for i in range(chunks + 1)]
        with conn.transaction():
            conn.execute("DELETE FROM files_passage WHERE file_id = %s", (file_id,))
            with conn.cursor().copy(
                "COPY files_passage"
                " (id, file_id, position, content, type, subtype, page_number, source_url)"
                " FROM STDIN"
            ) as copy:
                for position in range(chunks):
                    copy.write_row(
                        (
                            f"psg_{ULID()}",
                            file_id,
                            position,
                            text[bounds[position] : bounds[position + 1]],
                            "chunk",
                            "paragraph",
                            None,
                            "",
                        )
                    )
        elapsed = time.perf_counter() - started
        row = conn.execute(
            "SELECT count(*) FROM files_passage WHERE file_id = %s", (file_id,)
        ).fetchone()
        if row is None or row[0] != chunks:
            raise RuntimeError(f"the floor stored {row} rows, not {chunks}")
    return elapsed


def pypdf_alone(data: bytes) -> tuple[float, int]:
    from pypdf import PdfReader

    started = time.perf_counter()
    reader = PdfReader(io.BytesIO(data))
    characters = sum(len(page.extract_text()) for page in reader.pages)
    return time.perf_counter() - started, characters


# ---------------------------------------------------------------- checks


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


# ---------------------------------------------------------------- report


def median(values: Sequence[float]) -> float:
    return benchlib.percentile(values, 50)


@dataclass
class Series:
    runs: list[IndexRun] = field(default_factory=list)
    parse: list[float] = field(default_factory=list)
    baseline: list[float] = field(default_factory=list)

    def med(self, pick: Callable[[IndexRun], float]) -> float:
        return median([pick(run) for run in self.runs])


def print_runs(label: str, size: int, series: Series, unit_count: int = 0) -> None:
    print(f"{label}: {len(series.runs)} runs (run 1 right after the upload, then reindexes)")
    for number, run in enumerate(series.runs, start=1):
        per_page = f", {unit_count / run.total:6.1f} pages/s" if unit_count else ""
        print(
            f"  run {number}: file_index {run.total:7.2f} s = {size / MB / run.total:6.2f} MB/s"
            f"{per_page}, {run.passages:,} passages | read {run.parts['read']:.2f}"
            f" parse {run.parts['parse']:.2f} delete old {run.parts['delete']:.2f}"
            f" insert {run.insert:.2f} lock+save+commit {run.commit_and_rest:.2f}"
            f" claim+rest {run.other:.2f} s | CPU python {run.python_cpu:.2f} s,"
            f" postgres {run.postgres_cpu:.2f} s, background {run.other_cores:.2f} cores"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--text-mb", type=float, default=50.0)
    parser.add_argument("--pdf-pages", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--quiet-wait", type=float, default=300.0, help="seconds to wait for an idle machine"
    )
    parser.add_argument("--db", default="bench_indexing")
    args = parser.parse_args()
    quiet = Quiet(args.quiet_wait)
    benchlib.exit_cleanly_on_sigterm()

    print("== indexing: file_index throughput against floors measured in the same run")
    benchlib.print_machine()
    failures: list[str] = []
    queue = run_queue()

    benchlib.log(f"generating {args.text_mb:g} MB of text and a {args.pdf_pages}-page PDF")
    started = time.perf_counter()
    text_bytes = english_text(int(args.text_mb * MB))
    pages = pdf_pages(args.pdf_pages)
    from tests.documents import make_pdf

    pdf_bytes = make_pdf(pages)
    paragraphs = text_bytes.count(b"\n\n") + 1
    print(
        f"documents (made in {time.perf_counter() - started:.1f} s): text"
        f" {len(text_bytes):,} bytes, {paragraphs:,} paragraphs;"
        f" PDF {len(pdf_bytes):,} bytes, {len(pages)} pages,"
        f" {sum(len(t) for page in pages for _, t in page):,} characters of text"
    )

    with benchlib.project(args.db) as proj:
        django_setup(proj)
        from django.conf import settings
        from django.db import connection

        from bots.models import Bot
        from files.services import file_upsert
        from files.storage import files_storage

        max_length = settings.FILE_PASSAGE_MAX_LENGTH
        try:
            bot = Bot.objects.get(id=proj.demo["botId"])
            storage = type(files_storage()).__name__
            print(f"settings: FILE_PASSAGE_MAX_LENGTH {max_length}, files storage {storage}")

            # ------------------------------------------------ text
            started = time.perf_counter()
            text_file = upload(
                bot=bot, key="bench/corpus.txt", data=text_bytes, content_type=TEXT_CONTENT_TYPE
            )
            print(f"text uploaded in {time.perf_counter() - started:.2f} s: {text_file.id}")
            floor_file = file_upsert(
                bot=bot, key="bench/floor.txt", size=len(text_bytes), content_type="text/plain"
            )
            text = Series()
            for number in range(args.repeats):

                def index_phase(reindex: bool = number > 0) -> None:
                    maintenance(proj)
                    quiet.wait()
                    benchlib.log(f"text: file_index run {len(text.runs) + 1}")
                    text.runs.append(index_once(text_file.id, reindex=reindex))

                def parse_phase() -> None:
                    quiet.wait()
                    benchlib.log("text: parse alone")
                    text.parse.append(parse_alone(text_bytes, TEXT_CONTENT_TYPE)[0])

                def floor_phase() -> None:
                    # The floor cuts as many slices as file_index made passages:
                    # on the first round, that is known once the index has run.
                    maintenance(proj)
                    quiet.wait()
                    benchlib.log("text: floor")
                    chunks = text.runs[-1].passages
                    text.baseline.append(text_floor(proj, text_bytes, chunks, floor_file.id))

                phases = [index_phase, parse_phase, floor_phase]
                if number > 0:
                    # Rotate the order each round so a drift of the host's
                    # speed does not always favour the same phase.
                    shift = number % len(phases)
                    phases = phases[shift:] + phases[:shift]
                for phase in phases:
                    phase()
            rows = check_passages(
                text_file.id,
                words_of(text_bytes.decode()),
                max_length,
                failures,
                "text",
            )
            text_passages = len(rows)
            del rows
            if len({run.passages for run in text.runs}) != 1:
                failures.append(
                    f"text: runs made different passage counts {[r.passages for r in text.runs]}"
                )

            # ------------------------------------------------ PDF
            started = time.perf_counter()
            pdf_file = upload(
                bot=bot, key="bench/guide.pdf", data=pdf_bytes, content_type=PDF_CONTENT_TYPE
            )
            print(f"PDF uploaded in {time.perf_counter() - started:.2f} s: {pdf_file.id}")
            pdf = Series()
            pypdf_characters = 0
            for number in range(args.repeats):

                def pdf_index_phase(reindex: bool = number > 0) -> None:
                    maintenance(proj)
                    quiet.wait()
                    benchlib.log(f"pdf: file_index run {len(pdf.runs) + 1}")
                    pdf.runs.append(index_once(pdf_file.id, reindex=reindex))

                def pdf_parse_phase() -> None:
                    quiet.wait()
                    benchlib.log("pdf: parse alone")
                    pdf.parse.append(parse_alone(pdf_bytes, PDF_CONTENT_TYPE)[0])

                def pypdf_phase() -> None:
                    nonlocal pypdf_characters
                    quiet.wait()
                    benchlib.log("pdf: pypdf alone")
                    elapsed, pypdf_characters = pypdf_alone(pdf_bytes)
                    pdf.baseline.append(elapsed)

                phases = [pdf_index_phase, pdf_parse_phase, pypdf_phase]
                shift = number % len(phases)
                for phase in phases[shift:] + phases[:shift]:
                    phase()
            from pypdf import PdfReader

            page_count = len(PdfReader(io.BytesIO(pdf_bytes)).pages)
            if page_count != args.pdf_pages:
                failures.append(f"pdf: make_pdf made {page_count} pages, not {args.pdf_pages}")
            pdf_words = words_of(" ".join(t for page in pages for _, t in page))
            rows = check_passages(pdf_file.id, pdf_words, max_length, failures, "pdf")
            check_pdf_structure(rows, pages, failures)
            pdf_passages = len(rows)
            subtypes = sorted({row[2] for row in rows})
            print(
                f"pdf passages: {pdf_passages:,}, subtypes {subtypes},"
                f" pypdf plain text {pypdf_characters:,} characters"
            )
            with proj.connect(autocommit=True) as conn:
                facts = conn.execute(
                    "SELECT pg_size_pretty(pg_table_size('files_passage')),"
                    " pg_size_pretty(pg_indexes_size('files_passage'))"
                ).fetchone()
                indexes = conn.execute(
                    "SELECT indexname FROM pg_indexes WHERE tablename = 'files_passage'"
                    " ORDER BY indexname"
                ).fetchall()
            print(
                f"files_passage at the end: table {facts[0] if facts else '?'}, indexes"
                f" {facts[1] if facts else '?'} ({', '.join(i[0] for i in indexes)})"
            )
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"this process's peak resident memory: {peak:,.0f} MB (documents included)")
        finally:
            connection.close()
            with contextlib.suppress(Exception):
                purged = drop_queue(queue)
                print(f"celery queue {queue}: {purged} enqueued indexing messages purged, deleted")

    # ------------------------------------------------ report
    text_mb = len(text_bytes) / MB
    pdf_mb = len(pdf_bytes) / MB
    print()
    print_runs(f"text {text_mb:.1f} MB", len(text_bytes), text)
    print(
        "  parse alone (extract_passages): "
        + ", ".join(f"{t:.2f}" for t in text.parse)
        + " s; floor (decode + slice + COPY, committed): "
        + ", ".join(f"{t:.2f}" for t in text.baseline)
        + " s"
    )
    print_runs(f"pdf {len(pdf_bytes) / 1024:.0f} KB", len(pdf_bytes), pdf, args.pdf_pages)
    print(
        "  parse alone (extract_passages): "
        + ", ".join(f"{t:.2f}" for t in pdf.parse)
        + " s; pypdf alone (extract_text of every page): "
        + ", ".join(f"{t:.2f}" for t in pdf.baseline)
        + " s"
    )
    print(
        f"background load seen before the {len(quiet.seen)} phases: median"
        f" {median(quiet.seen):.2f}, max {max(quiet.seen):.2f} cores"
    )
    print()
    print(f"RESULT indexing (median of {args.repeats} runs each)")
    t_index = text.med(lambda r: r.total)
    t_floor = median(text.baseline)
    print(
        f"  text {text_mb:5.1f} MB  file_index {t_index:7.2f} s = {text_mb / t_index:6.2f} MB/s,"
        f" {text_passages:,} passages"
    )
    print(
        f"    split: read {text.med(lambda r: r.parts['read']):.2f} s, parse"
        f" {text.med(lambda r: r.parts['parse']):.2f} s, write"
        f" {text.med(lambda r: r.parts['write']):.2f} s (delete old"
        f" {text.med(lambda r: r.parts['delete']):.2f}, insert {text.med(lambda r: r.insert):.2f}),"
        f" lock+save+commit {text.med(lambda r: r.commit_and_rest):.2f} s, claim+rest"
        f" {text.med(lambda r: r.other):.2f} s; parse alone {median(text.parse):.2f} s"
    )
    print(
        f"    floor (decode + {text_passages:,} slices + COPY) {t_floor:.2f} s ="
        f" {text_mb / t_floor:6.2f} MB/s; ratio file_index/floor {t_floor / t_index:.3f}"
        f" ({t_index / t_floor:.1f}x the floor's time)"
    )
    p_index = pdf.med(lambda r: r.total)
    p_base = median(pdf.baseline)
    print(
        f"  pdf {args.pdf_pages} pages, {pdf_mb:.2f} MB  file_index {p_index:7.2f} s ="
        f" {pdf_mb / p_index:6.3f} MB/s, {args.pdf_pages / p_index:6.1f} pages/s,"
        f" {pdf_passages:,} passages"
    )
    print(
        f"    split: read {pdf.med(lambda r: r.parts['read']):.3f} s, parse"
        f" {pdf.med(lambda r: r.parts['parse']):.2f} s, write"
        f" {pdf.med(lambda r: r.parts['write']):.3f} s, lock+save+commit"
        f" {pdf.med(lambda r: r.commit_and_rest):.3f} s, claim+rest"
        f" {pdf.med(lambda r: r.other):.3f} s; parse alone {median(pdf.parse):.2f} s"
    )
    print(
        f"    pypdf alone {p_base:.2f} s = {pdf_mb / p_base:6.3f} MB/s,"
        f" {args.pdf_pages / p_base:6.1f} pages/s; ratio file_index/pypdf {p_base / p_index:.3f}"
        f" ({p_index / p_base:.2f}x pypdf's time)"
    )
    if failures:
        print("CORRECTNESS CHECKS FAILED:")
        for failure in failures:
            print(f"  - {failure}")
        return 1
    print(
        "  correctness: every run completed; positions contiguous; passages within"
        f" {max_length} characters; words in document order (text and PDF); PDF title and"
        " subtitles on their pages"
    )
    return 0


if __name__ == "__main__":
    os.chdir(benchlib.ROOT)
    sys.exit(main())
