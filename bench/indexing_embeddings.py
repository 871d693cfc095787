"""Indexing throughput with sentence embeddings ÷ without, and the
embedding step alone by batch size, in the same run.

    .venv/bin/python bench/indexing_embeddings.py [--text-kb 600 --repeats 3]

1. A fresh database bench_indexing_embeddings (PostgreSQL), migrated and
   seeded; the run's Celery queue is one no worker consumes.
2. Two documents, uploaded the real way (files.services.files.file_upsert
   with index=True, then the upload), each indexed by file_index in-process:
   - prose: bench/harness/documents.english_text, --text-kb of it
     (passages up to FILE_PASSAGE_MAX_LENGTH, 1,000 characters: most reach
     the model's 128 tokens);
   - docs: the paragraphs of bench/data/search_collection (Python's
     documentation, 1,897 paragraphs, one a block: shorter passages).
3. Rounds of --repeats, the order rotated each round: file_reindex then
   file_index of each document with semantic search on (the passages
   embedded in the same pass) and off (FILE_SEARCH_SEMANTIC=False);
   passages/s = passages ÷ file_index's wall time; the ratio on ÷ off.
4. The embedding step alone on the prose's passages (EmbeddingModel.embed)
   with 1, 4, 8 and 16 texts a run, and the mean tokens per passage.

Target (issue 30): >= 200 passages/s with embeddings on 2 cores (reported,
never asserted). Check (exit 1): every run completed with vectors for every
paragraph when on and none when off.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import cli, load, machine  # noqa: E402
from harness.documents import drop_queue, english_text, indexing_queue, upload  # noqa: E402
from harness.project import django_setup, project  # noqa: E402
from harness.report import log, median, verdict  # noqa: E402

COLLECTION = Path(__file__).resolve().parent / "data" / "search_collection"
BATCHES = (1, 4, 8, 16)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--text-kb", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    cli.add_db(parser, "bench_indexing_embeddings")
    return parser.parse_args()


def docs_text() -> bytes:
    paragraphs = [json.loads(line)["text"] for line in (COLLECTION / "corpus.jsonl").open()]
    return "\n\n".join(paragraphs).encode()


def index_run(file_id: str, *, semantic: bool, failures: list[str]) -> tuple[float, int]:
    """(wall seconds, passages) of file_reindex + file_index of `file_id`."""
    from django.test import override_settings

    from files.embeddings.vectors import positions_count
    from files.models import HEADING_SUBTYPES, File, FileEmbeddings, Passage
    from files.services.file_index import IndexingOutcome, file_index
    from files.services.files import file_reindex

    file = file_reindex(file=File.objects.get(id=file_id))
    with override_settings(FILE_SEARCH_SEMANTIC=semantic):
        started = time.perf_counter()
        outcome = file_index(file_id=file.id, revision=file.revision)
        elapsed = time.perf_counter() - started
    if outcome != IndexingOutcome.COMPLETED:
        failures.append(f"{file_id}: {outcome}")
    passages = Passage.objects.filter(file_id=file_id)
    paragraphs = passages.exclude(subtype__in=HEADING_SUBTYPES)
    stored = FileEmbeddings.objects.filter(file_id=file_id).first()
    embedded = positions_count(bytes(stored.positions)) if stored is not None else 0
    if embedded != (paragraphs.count() if semantic else 0):
        failures.append(f"{file_id}: {embedded} vectors for {paragraphs.count()} paragraphs")
    return elapsed, passages.count()


def embed_alone(texts: list[str]) -> dict[int, float]:
    """Passages/s of the model alone on `texts`, by texts a run."""
    from files.embeddings import model as embedding

    loaded = embedding.model()
    assert loaded is not None
    rates: dict[int, float] = {}
    original = embedding.BATCH
    try:
        for batch in BATCHES:
            embedding.BATCH = batch
            started = time.perf_counter()
            loaded.embed(texts)
            rates[batch] = len(texts) / (time.perf_counter() - started)
    finally:
        embedding.BATCH = original
    return rates


def main() -> int:
    args = parse_args()
    machine.start("== indexing with sentence embeddings ÷ without, same run")
    queue = indexing_queue()
    failures: list[str] = []
    runs: dict[tuple[str, bool], list[tuple[float, int]]] = defaultdict(list)
    documents = {"prose": english_text(args.text_kb * 1024), "docs": docs_text()}
    with project(args.db) as proj:
        django_setup(proj)
        from django.db import connection

        from bots.models import Bot
        from files.embeddings.model import model
        from files.models import Passage

        try:
            bot = Bot.objects.get(id=proj.demo["botId"])
            ids = {
                name: upload(
                    bot=bot, key=f"bench/{name}.txt", data=data, content_type="text/plain"
                ).id
                for name, data in documents.items()
            }
            loaded = model()
            assert loaded is not None, "the semantic extra is not installed"

            def phase(name: str, semantic: bool) -> Callable[[int], None]:
                def run(number: int) -> None:
                    log(f"{name}, embeddings {'on' if semantic else 'off'}: round {number + 1}")
                    runs[(name, semantic)].append(
                        index_run(ids[name], semantic=semantic, failures=failures)
                    )

                return run

            load.rotated_rounds(
                args.repeats, [phase(n, s) for n in documents for s in (True, False)]
            )
            prose = list(
                Passage.objects.filter(file_id=ids["prose"]).values_list("content", flat=True)
            )
            tokens = [len(e.ids) for e in loaded._tokenizer.encode_batch(prose)]
            alone = embed_alone(prose)
        finally:
            connection.close()
            with contextlib.suppress(Exception):
                drop_queue(queue)

    print(f"\nRESULT indexing_embeddings (median of {args.repeats} runs)")
    for name in documents:
        on = median([p / t for t, p in runs[(name, True)]])
        off = median([p / t for t, p in runs[(name, False)]])
        passages = runs[(name, True)][0][1]
        print(
            f"  {name:6} {len(documents[name]) / 1024:6.0f} KB, {passages:,} passages:"
            f" with embeddings {on:7.1f} passages/s, without {off:8.1f}/s,"
            f" on ÷ off {on / off:.3f}  (target with: >= 200/s)"
        )
    print(
        f"  embedding alone, prose passages ({sum(tokens) / len(tokens):.0f} tokens on average,"
        f" at most 128): "
        + ", ".join(f"{batch} a run {rate:.0f}/s" for batch, rate in alone.items())
    )
    return verdict(failures, "CORRECTNESS CHECKS PASSED")


if __name__ == "__main__":
    sys.exit(main())
