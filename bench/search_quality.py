"""Search quality: nDCG@10 and recall@10 of GET /v1/files/search's ranking
against bm25s on the same passages, over bench/data/search_collection
(Python's documentation topics: 1,897 paragraphs, 430 questions written by
hand before any ranking was run, graded judgments; its README says how).

    .venv/bin/python bench/search_quality.py [--database sqlite|postgresql]

1. A fresh database (SQLite under a temporary DATA_DIR, or PostgreSQL
   bench_search_quality), migrated and seeded; the demo bot gets one file
   per topic and one passage per paragraph, in order (positions 0..n), set
   through files.services.files.file_passages_set (what setFilePassages
   does), so the database's own search columns are kept as in service.
2. The files' passages embedded by files.services.embeddings.file_embed
   (what the worker runs after setFilePassages), timed: passages/s.
3. Each question three ways in-process, the passages mapped back to
   paragraphs: the lexical ranker alone, the semantic ranker alone
   (files/selectors/search_lexical.py, search_semantic.py, top 10 each),
   and the hybrid the API answers (files.selectors.search.files_search,
   limit 10, no context).
4. bm25s (BM25, english stop words, Snowball stemmer: PyStemmer) over the
   same paragraphs, top 10.
5. nDCG@10 (graded: 2 answers the question, 1 relevant) and recall@10 (of
   the paragraphs judged 2), the mean over the questions; the ratio of the
   service's nDCG@10 to bm25s's. The service ranks paragraphs, not headings:
   the collection has none.

Target (issue 30, reported): hybrid >= 1.10 x bm25s's nDCG@10, and no worse
than the better of its halves. Checks (exit 1): every question answered,
every passage named maps to a paragraph of the collection.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import cli, machine  # noqa: E402
from harness.project import django_setup, project  # noqa: E402
from harness.report import log, verdict  # noqa: E402

COLLECTION = Path(__file__).resolve().parent / "data" / "search_collection"
K = 10


def parse_args() -> argparse.Namespace:
    parser = cli.parser(__doc__)
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="postgresql")
    return parser.parse_args()


def collection() -> tuple[list[dict[str, str]], list[dict[str, str]], dict[str, dict[str, int]]]:
    corpus = [json.loads(line) for line in (COLLECTION / "corpus.jsonl").open()]
    queries = [json.loads(line) for line in (COLLECTION / "queries.jsonl").open()]
    judged: dict[str, dict[str, int]] = defaultdict(dict)
    with (COLLECTION / "qrels.tsv").open() as rows:
        next(rows)
        for row in rows:
            query, paragraph, score = row.rstrip("\n").split("\t")
            judged[query][paragraph] = int(score)
    return corpus, queries, judged


def ndcg(ranked: list[str], judged: dict[str, int]) -> float:
    gain = sum(judged.get(pid, 0) / math.log2(n + 2) for n, pid in enumerate(ranked[:K]))
    ideal = sorted(judged.values(), reverse=True)[:K]
    best = sum(g / math.log2(n + 2) for n, g in enumerate(ideal))
    return gain / best if best else 0.0


def recall(ranked: list[str], judged: dict[str, int]) -> float:
    answers = {pid for pid, grade in judged.items() if grade == 2}
    return len(answers & set(ranked[:K])) / len(answers)


def bm25s_ranked(corpus: list[dict[str, str]], queries: list[dict[str, str]]) -> list[list[str]]:
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(
            [p["text"] for p in corpus], stopwords="en", stemmer=stemmer, show_progress=False
        ),
        show_progress=False,
    )
    tokens = bm25s.tokenize(
        [q["text"] for q in queries], stopwords="en", stemmer=stemmer, show_progress=False
    )
    found, _ = retriever.retrieve(tokens, k=K, show_progress=False)
    return [[corpus[int(n)]["id"] for n in row] for row in found]


def service_ranked(
    corpus: list[dict[str, str]],
    queries: list[dict[str, str]],
    failures: list[str],
    demo_bot: str,
) -> dict[str, list[list[str]]]:
    from django.db import connection

    from bots.models import Bot
    from files.models import File, FileStatus, Passage
    from files.passage_data import PassageData
    from files.selectors.search import SearchRequest, files_search, searchable_files
    from files.selectors.search_lexical import passages_ranked_lexically
    from files.selectors.search_semantic import passages_ranked_semantically
    from files.services.embeddings import file_embed
    from files.services.files import file_passages_set

    # A bot of its own: the demo bot holds the demo's files.
    demo = Bot.objects.get(id=demo_bot)
    bot = Bot.objects.create(workspace=demo.workspace, name="search quality")
    by_topic: dict[str, list[dict[str, str]]] = defaultdict(list)
    for paragraph in corpus:
        by_topic[paragraph["title"]].append(paragraph)
    for topic, paragraphs in by_topic.items():
        file = File.objects.create(
            bot=bot, key=f"topics/{topic}.txt", size=1, content_type="text/plain",
            status=FileStatus.INDEXING_COMPLETED,
        )  # fmt: skip
        file_passages_set(
            file=file,
            passages=[
                PassageData(
                    content=p["text"],
                    type="chunk",
                    subtype="paragraph",
                    page_number=None,
                    source_url="",
                    position=n,
                )
                for n, p in enumerate(paragraphs)
            ],  # fmt: skip
        )
    if connection.vendor == "postgresql":
        # What autovacuum does after such a write: the statistics that say
        # how rare a word is (files/selectors/search_bm25_postgresql.py).
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE files_passage")
    started = time.perf_counter()
    for file in File.objects.filter(bot=bot):
        if not file_embed(file_id=file.id):
            failures.append(f"{file.key}: not embedded")
    elapsed = time.perf_counter() - started
    log(f"embedded {len(corpus):,} passages in {elapsed:.1f} s: {len(corpus) / elapsed:.0f}/s")
    paragraph_of = {
        (key.removeprefix("topics/").removesuffix(".txt"), position): pid
        for pid, key, position in Passage.objects.filter(file__bot=bot).values_list(
            "id", "file__key", "position"
        )
    }
    ids = {pid: by_topic[topic][position]["id"] for (topic, position), pid in paragraph_of.items()}
    ranked: dict[str, list[list[str]]] = defaultdict(list)
    files = searchable_files(bot=bot, tags=[])
    for query in queries:
        lexical = passages_ranked_lexically(files=files, query=query["text"], limit=K)
        semantic = passages_ranked_semantically(files=files, query=query["text"], limit=K) or []
        hits = files_search(
            bot=bot,
            request=SearchRequest(
                query=query["text"],
                tags=[],
                context_depth=0,
                limit=K,
                consolidate=False,
                include_breadcrumb=False,
                with_context=False,
            ),  # fmt: skip
        )
        hybrid = [hit.passage.id for hit in hits]
        for label, passages in (("lexical", lexical), ("semantic", semantic), ("hybrid", hybrid)):
            if any(pid not in ids for pid in passages):
                failures.append(f"{query['id']}: a passage outside the collection")
            ranked[label].append([ids[pid] for pid in passages if pid in ids])
    return ranked


def scores(
    ranked: list[list[str]], queries: list[dict[str, str]], judged: dict[str, dict[str, int]]
) -> tuple[float, float, int]:
    ndcgs = [ndcg(r, judged[q["id"]]) for r, q in zip(ranked, queries, strict=True)]
    recalls = [recall(r, judged[q["id"]]) for r, q in zip(ranked, queries, strict=True)]
    return statistics.mean(ndcgs), statistics.mean(recalls), sum(1 for r in ranked if not r)


def main() -> int:
    args = parse_args()
    machine.start()
    corpus, queries, judged = collection()
    failures: list[str] = []
    with project("bench_search_quality", sqlite=args.database == "sqlite") as proj:
        django_setup(proj)
        log(f"{len(corpus):,} paragraphs, {len(queries)} questions: the service's ranking")
        service = service_ranked(corpus, queries, failures, proj.demo["botId"])
    log("bm25s")
    baseline = bm25s_ranked(corpus, queries)
    print(
        f"\nRESULT search_quality ({args.database}): {len(queries)} questions,"
        f" {len(corpus):,} paragraphs"
    )
    rows = {f"the service, {label}": scores(r, queries, judged) for label, r in service.items()}
    rows["bm25s"] = scores(baseline, queries, judged)
    for label, (n, r, empty) in rows.items():
        print(
            f"  {label:24} nDCG@10 {n:.4f}  recall@10 {r:.4f}"
            f"  ÷ bm25s {n / rows['bm25s'][0]:.3f}  questions answered nothing: {empty}"
        )
    hybrid = rows["the service, hybrid"][0]
    halves = max(rows["the service, lexical"][0], rows["the service, semantic"][0])
    print(
        f"  hybrid ÷ bm25s, nDCG@10: {hybrid / rows['bm25s'][0]:.3f} (target >= 1.10);"
        f" ÷ the better half: {hybrid / halves:.3f} (target >= 1)"
    )
    return verdict(failures, "CORRECTNESS CHECKS PASSED")


if __name__ == "__main__":
    sys.exit(main())
