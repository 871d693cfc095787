"""Indexing throughput: a 50 MB plain-text file and a 300-page PDF through
files.services.file_index.file_index, against floors measured in the same run.

    .venv/bin/python bench/indexing.py [--text-mb 50 --pdf-pages 300 --repeats 3]

1. A fresh database bench_indexing, migrated and seeded (a bot), and a
   DATA_DIR of the run under /tmp: the files storage is a folder in it.
2. The documents, generated (seeded, so every run indexes the same bytes):
   - text: English-like words, paragraphs of 2-8 sentences separated by blank
     lines, one in ten a long paragraph of 12-30 sentences (over 1,000
     characters), one in three hard-wrapped at about 12 words a line;
   - PDF: tests/documents.make_pdf, a title on page 1, a subtitle every 4
     pages, paragraphs filling every page.
3. Each document is uploaded the real way (files.services.files.file_upsert
   with index=True, then files.services.file_uploads.file_upload_receive, which
   stores the bytes and leaves the file indexing_pending), then indexed
   --repeats times: run 1 right after the upload, the others after
   files.services.files.file_reindex. Each timed run is
   file_index(file_id=..., revision=...) called in-process, with its split
   (read from storage, parse, delete the old passages, insert the new ones,
   the rest of the final transaction with its commit) taken by
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
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import cli, load, machine, report  # noqa: E402
from harness.documents import (  # noqa: E402
    MB,
    PDF_CONTENT_TYPE,
    TEXT_CONTENT_TYPE,
    Documents,
    check_passages,
    check_pdf_structure,
    drop_queue,
    indexing_queue,
    make_documents,
    passages_vacuum,
    upload,
    words_of,
)
from harness.project import ROOT, Project, django_setup, project  # noqa: E402
from harness.report import median, verdict  # noqa: E402

sys.path.insert(1, str(ROOT))  # tests.documents (make_pdf)


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


def index_once(file_id: str, *, reindex: bool) -> IndexRun:
    """file_index of the file (after file_reindex when `reindex`), timed, with its split."""
    import files.services.file_index as indexing
    from files.models import File, FileStatus, Passage
    from files.services import file_status as status
    from files.services import passages
    from files.services.file_index import IndexingOutcome, file_index
    from files.services.files import file_reindex

    file = File.objects.get(id=file_id)
    if reindex:
        file = file_reindex(file=file)
    if file.status != FileStatus.INDEXING_PENDING:
        raise RuntimeError(f"{file_id} is {file.status}, not indexing_pending")
    # Each function patched in the module that looks it up when indexing runs.
    targets = [
        (indexing, "blob_read", "read"),
        (indexing, "extract_passages", "parse"),
        (indexing, "_finish", "finish"),
        (status, "passages_replace", "write"),
        (passages, "passages_clear", "delete"),
    ]
    with load.stopwatches(targets) as spent:
        before = machine.cpu_snapshot()
        started_cpu = time.process_time()
        started = time.perf_counter()
        outcome = file_index(file_id=file.id, revision=file.revision)
        total = time.perf_counter() - started
        python_cpu = time.process_time() - started_cpu
        after = machine.cpu_snapshot()
    if outcome != IndexingOutcome.COMPLETED:
        file.refresh_from_db()
        raise RuntimeError(f"indexing {file_id}: {outcome} ({file.failed_status_reason})")
    postgres_cpu = after.by_group["postgres"] - before.by_group["postgres"]
    busy = after.machine_busy - before.machine_busy
    return IndexRun(
        total=total,
        parts={label: sum(times) for label, times in spent.items()},
        passages=Passage.objects.filter(file_id=file_id).count(),
        python_cpu=python_cpu,
        postgres_cpu=postgres_cpu,
        other_cores=max(busy - python_cpu - postgres_cpu, 0.0) / total,
    )


def parse_alone(data: bytes, content_type: str) -> tuple[float, int]:
    from django.conf import settings

    from files.parsing import extract_passages

    started = time.perf_counter()
    passages = extract_passages(
        data, content_type=content_type, max_length=settings.FILE_PASSAGE_MAX_LENGTH
    )
    return time.perf_counter() - started, len(passages)


def text_floor(proj: Project, data: bytes, chunks: int, file_id: str) -> float:
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


# ---------------------------------------------------------------- report


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


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--text-mb", type=float, default=50.0)
    parser.add_argument("--pdf-pages", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    cli.add_quiet_wait(parser)
    cli.add_db(parser, "bench_indexing")
    return parser.parse_args()


@dataclass
class Bench:
    proj: Project
    quiet: machine.QuietLog
    repeats: int
    max_length: int
    failures: list[str] = field(default_factory=list)

    def index_phase(self, label: str, file_id: str, series: Series) -> Callable[[int], None]:
        """file_index of `file_id`: after the upload in round 0, then after file_reindex."""

        def phase(number: int) -> None:
            passages_vacuum(self.proj)
            self.quiet.wait()
            report.log(f"{label}: file_index run {len(series.runs) + 1}")
            series.runs.append(index_once(file_id, reindex=number > 0))

        return phase

    def parse_phase(
        self, label: str, data: bytes, content_type: str, series: Series
    ) -> Callable[[int], None]:
        def phase(number: int) -> None:
            self.quiet.wait()
            report.log(f"{label}: parse alone")
            series.parse.append(parse_alone(data, content_type)[0])

        return phase

    def text(self, bot: Any, data: bytes) -> tuple[Series, int]:
        """The text: file_index, the parse alone, the floor; checked."""
        from files.services.files import file_upsert

        started = time.perf_counter()
        text_file = upload(
            bot=bot, key="bench/corpus.txt", data=data, content_type=TEXT_CONTENT_TYPE
        )
        print(f"text uploaded in {time.perf_counter() - started:.2f} s: {text_file.id}")
        floor_file = file_upsert(
            bot=bot, key="bench/floor.txt", size=len(data), content_type="text/plain"
        )
        text = Series()

        def floor_phase(number: int) -> None:
            # The floor cuts as many slices as file_index made passages: on
            # the first round, that is known once the index has run.
            passages_vacuum(self.proj)
            self.quiet.wait()
            report.log("text: floor")
            chunks = text.runs[-1].passages
            text.baseline.append(text_floor(self.proj, data, chunks, floor_file.id))

        load.rotated_rounds(
            self.repeats,
            [
                self.index_phase("text", text_file.id, text),
                self.parse_phase("text", data, TEXT_CONTENT_TYPE, text),
                floor_phase,
            ],
        )
        words = words_of(data.decode())
        passages = len(check_passages(text_file.id, words, self.max_length, self.failures, "text"))
        if len({run.passages for run in text.runs}) != 1:
            self.failures.append(
                f"text: runs made different passage counts {[r.passages for r in text.runs]}"
            )
        return text, passages

    def pdf(self, bot: Any, docs: Documents, page_count: int) -> tuple[Series, int]:
        """The PDF: file_index, the parse alone, pypdf alone; checked."""
        started = time.perf_counter()
        pdf_file = upload(
            bot=bot, key="bench/guide.pdf", data=docs.pdf, content_type=PDF_CONTENT_TYPE
        )
        print(f"PDF uploaded in {time.perf_counter() - started:.2f} s: {pdf_file.id}")
        pdf = Series()
        pypdf_characters = 0

        def pypdf_phase(number: int) -> None:
            nonlocal pypdf_characters
            self.quiet.wait()
            report.log("pdf: pypdf alone")
            elapsed, pypdf_characters = pypdf_alone(docs.pdf)
            pdf.baseline.append(elapsed)

        load.rotated_rounds(
            self.repeats,
            [
                self.index_phase("pdf", pdf_file.id, pdf),
                self.parse_phase("pdf", docs.pdf, PDF_CONTENT_TYPE, pdf),
                pypdf_phase,
            ],
        )
        from pypdf import PdfReader

        made = len(PdfReader(io.BytesIO(docs.pdf)).pages)
        if made != page_count:
            self.failures.append(f"pdf: make_pdf made {made} pages, not {page_count}")
        pdf_words = words_of(" ".join(t for page in docs.pages for _, t in page))
        rows = check_passages(pdf_file.id, pdf_words, self.max_length, self.failures, "pdf")
        check_pdf_structure(rows, docs.pages, self.failures)
        subtypes = sorted({row[2] for row in rows})
        print(
            f"pdf passages: {len(rows):,}, subtypes {subtypes},"
            f" pypdf plain text {pypdf_characters:,} characters"
        )
        return pdf, len(rows)


def print_table(proj: Project) -> None:
    """files_passage's size at the end, and this process's peak memory."""
    with proj.connect(autocommit=True) as conn:
        facts = conn.execute(
            "SELECT pg_size_pretty(pg_table_size('files_passage')),"
            " pg_size_pretty(pg_indexes_size('files_passage'))"
        ).fetchone()
        indexes = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'files_passage' ORDER BY indexname"
        ).fetchall()
    print(
        f"files_passage at the end: table {facts[0] if facts else '?'}, indexes"
        f" {facts[1] if facts else '?'} ({', '.join(i[0] for i in indexes)})"
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"this process's peak resident memory: {peak:,.0f} MB (documents included)")


def print_alone(series: Series, baseline: str) -> None:
    """The parse alone and the baseline of each round, seconds."""
    parse = ", ".join(f"{t:.2f}" for t in series.parse)
    base = ", ".join(f"{t:.2f}" for t in series.baseline)
    print(f"  parse alone (extract_passages): {parse} s; {baseline}: {base} s")


def print_series(docs: Documents, text: Series, pdf: Series, args: argparse.Namespace) -> None:
    print()
    print_runs(f"text {len(docs.text) / MB:.1f} MB", len(docs.text), text)
    print_alone(text, "floor (decode + slice + COPY, committed)")
    print_runs(f"pdf {len(docs.pdf) / 1024:.0f} KB", len(docs.pdf), pdf, args.pdf_pages)
    print_alone(pdf, "pypdf alone (extract_text of every page)")


def print_result(
    docs: Documents, text: Series, pdf: Series, passages: tuple[int, int], args: argparse.Namespace
) -> None:
    text_mb, pdf_mb = len(docs.text) / MB, len(docs.pdf) / MB
    text_passages, pdf_passages = passages
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


def main() -> int:
    args = parse_args()
    machine.start("== indexing: file_index throughput against floors measured in the same run")
    queue = indexing_queue()
    docs = make_documents(args.text_mb, args.pdf_pages)
    with project(args.db) as proj:
        django_setup(proj)
        from django.conf import settings
        from django.db import connection

        from bots.models import Bot
        from files.storage import files_storage

        max_length = settings.FILE_PASSAGE_MAX_LENGTH
        bench = Bench(proj, machine.QuietLog(args.quiet_wait), args.repeats, max_length)
        try:
            bot = Bot.objects.get(id=proj.demo["botId"])
            storage = type(files_storage()).__name__
            print(f"settings: FILE_PASSAGE_MAX_LENGTH {max_length}, files storage {storage}")
            text, text_passages = bench.text(bot, docs.text)
            pdf, pdf_passages = bench.pdf(bot, docs, args.pdf_pages)
            print_table(proj)
        finally:
            connection.close()
            with contextlib.suppress(Exception):
                purged = drop_queue(queue)
                print(f"celery queue {queue}: {purged} enqueued indexing messages purged, deleted")

    print_series(docs, text, pdf, args)
    seen = bench.quiet.seen
    print(
        f"background load seen before the {len(seen)} phases: median"
        f" {median(seen):.2f}, max {max(seen):.2f} cores"
    )
    print_result(docs, text, pdf, (text_passages, pdf_passages), args)
    return verdict(
        bench.failures,
        "  correctness: every run completed; positions contiguous; passages within"
        f" {max_length} characters; words in document order (text and PDF); PDF title and"
        " subtitles on their pages",
    )


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
