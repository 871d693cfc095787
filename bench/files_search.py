"""Searching passages (GET /v1/files/search) through `make run`'s web on
PostgreSQL + Redis: one bot holding 200,000 passages, then the same bot
among 2,000,000 passages of 100 bots, against a passages page in the same
rounds.

    .venv/bin/python bench/files_search.py [--passages 200000 --bots 100
        --total 2000000 --queries 200 --rounds 3]

1. A fresh database bench_files_search (migrated, seeded), the demo bot's
   --passages passages in 20 files, each passage a paragraph of the
   seeded English-like prose of bench/indexing.py (4,000 invented words
   beside common ones, Zipf-weighted), loaded by COPY (the search trigger
   sets each passage's vector as it goes), then VACUUM ANALYZE; each file's
   sentence embeddings (files_fileembeddings) are random unit vectors, one
   per passage (embedding 200,000 passages would take 40 minutes here;
   scoring costs the same whatever the vectors hold).
2. The Procfile's web line (`python -m platform_site.serve`, one process a
   core, access log on, semantic search on), one keep-alive connection:
   --rounds rounds of --queries questions (3 to 8 words of the prose,
   drawn as it draws them, and a question's common words), each followed
   by the passages page of one of the bot's files (limit 20): p50 and p99
   of each, the ratio. Then the same with FILE_SEARCH_SEMANTIC=false (the
   lexical ranking alone, the default install's). Then, in-process, the
   lexical ranking's top 10 for each question with its bound on candidates
   (CANDIDATE_PASSAGES) against every word drawing: the share it keeps.
3. --bots - 1 more bots with (--total - --passages) passages between them,
   loaded the same way, with vectors; the same questions for the demo bot
   again, and for one of the small bots; then the demo bot's with the
   lexical ranking alone.

Targets (reported, never asserted): search p50 <= 50 ms, p99 <= 150 ms,
search / a passages page <= 10 at p50; the demo bot's p50 among 2M
passages / alone <= 1.2. Checks (exit 1): every answer is 200, the demo
bot's answers name only its files.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import sys
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import cli, machine, servers  # noqa: E402
from harness.documents import Prose  # noqa: E402
from harness.event_rows import make_bots  # noqa: E402
from harness.project import Project, django_setup, project  # noqa: E402
from harness.report import log, percentile, verdict  # noqa: E402

FILES_PER_BOT = 20
KEPT_QUESTIONS = 50
PAGE = 20


def parse_args() -> argparse.Namespace:
    parser = cli.parser(__doc__)
    parser.add_argument("--passages", type=int, default=200_000)
    parser.add_argument("--bots", type=int, default=100)
    parser.add_argument("--total", type=int, default=2_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    return parser.parse_args()


def files_made(proj: Project, bot_id: str, count: int, tag: str) -> list[str]:
    """`count` indexed files of the bot; their ids."""
    from ulid import ULID

    ids = [f"file_{ULID()}" for _ in range(count)]
    with proj.connect() as conn:
        conn.cursor().executemany(
            "INSERT INTO files_file (id, bot_id, key, size, content_type, tags, metadata,"
            " access_policies, index, max_chunk_length, public_content_immediately_accessible,"
            " status, failed_status_reason, storage_name, upload_id, revision,"
            " passages_version, indexing_lease, indexing_attempts, created_at, updated_at)"
            " VALUES (%s, %s, %s, 1000, 'text/plain', %s, '{}', '[]', true, NULL, false,"
            " 'indexing_completed', '', '', '', 0, 0, 0, 0, now(), now())",
            [
                (file_id, bot_id, f"{tag}/{n}.txt", json.dumps({"set": tag}))
                for n, file_id in enumerate(ids)
            ],
        )
        conn.commit()
    return ids


def passages_loaded(proj: Project, files: list[str], count: int, prose: Prose) -> None:
    """`count` passages spread over `files`, by COPY."""
    from ulid import ULID

    with proj.connect() as conn, conn.cursor() as cursor:
        with cursor.copy(
            "COPY files_passage (id, file_id, position, content, type, subtype, page_number,"
            " source_url) FROM STDIN"
        ) as copy:
            for n in range(count):
                text = prose.paragraph(prose.rng.randint(2, 6))
                copy.write_row(
                    (f"psg_{ULID()}", files[n % len(files)], n // len(files), text,
                     "chunk", "paragraph", None, "")
                )  # fmt: skip
        conn.commit()
    with proj.connect(autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) files_passage")
        conn.execute("CHECKPOINT")


def vectors_loaded(proj: Project, files: list[str]) -> None:
    """Random unit vectors for every passage of `files`, stored as
    files.services.embeddings stores them."""
    import numpy as np

    from files.embeddings.model import DIMENSIONS, MODEL_ID
    from files.embeddings.vectors import vectors_pack

    rng = np.random.default_rng(7)
    with proj.connect() as conn, conn.cursor() as cursor:
        for file_id in files:
            positions = [
                row[0]
                for row in cursor.execute(
                    "SELECT position FROM files_passage WHERE file_id = %s ORDER BY position",
                    [file_id],
                )
            ]
            vectors = rng.standard_normal((len(positions), DIMENSIONS), dtype=np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            packed_positions, packed = vectors_pack(positions, vectors)
            cursor.execute(
                "INSERT INTO files_fileembeddings (file_id, passages_version, model, positions,"
                " vectors) VALUES (%s, 0, %s, %s, %s)",
                [file_id, MODEL_ID, packed_positions, packed],
            )
        conn.commit()


def questions(prose: Prose, count: int) -> list[str]:
    rng = random.Random(11)
    made = []
    for _ in range(count):
        words = rng.choices(prose.words, cum_weights=prose.weights, k=rng.randint(3, 8))
        made.append("What about " + " ".join(words) + "?")
    return made


class Client:
    def __init__(self, port: int, token: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.token = token
        self.failures: list[str] = []
        # Files the seeding gave the demo bot: also its own.
        self.seeded: set[str] = set()

    def get(self, path: str, bot_id: str) -> tuple[float, object]:
        headers = {"Authorization": f"Bearer {self.token}", "x-bot-id": bot_id}
        started = time.perf_counter()
        try:
            self.conn.request("GET", path, headers=headers)
            response = self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionError):
            # Closed while idle (the server's keep-alive timeout): again.
            self.conn.close()
            started = time.perf_counter()
            self.conn.request("GET", path, headers=headers)
            response = self.conn.getresponse()
        body = response.read()
        spent = (time.perf_counter() - started) * 1000
        if response.status != 200:
            self.failures.append(f"GET {path[:60]}: {response.status} {body[:200]!r}")
            return spent, None
        return spent, json.loads(body)


def rounds(
    client: Client, bot_id: str, files: list[str], asked: list[str], count: int
) -> tuple[list[float], list[float], int]:
    """Search and page times (ms), and how many answers were empty."""
    searched, paged, empty = [], [], 0
    own = set(files) | client.seeded
    for _ in range(count):
        for n, question in enumerate(asked):
            query = urllib.parse.urlencode({"query": question, "contextDepth": 1})
            spent, body = client.get(f"/v1/files/search?{query}", bot_id)
            searched.append(spent)
            passages = body["passages"] if isinstance(body, dict) else []
            empty += not passages
            strangers = {p["file"]["id"] for p in passages} - own
            if strangers:
                client.failures.append(f"{bot_id}: an answer named another bot's file {strangers}")
            spent, _ = client.get(
                f"/v1/files/{files[n % len(files)]}/passages?limit={PAGE}", bot_id
            )
            paged.append(spent)
    return searched, paged, empty


def top_kept(proj: Project, bot_id: str, asked: list[str]) -> str:
    """In-process: how much of the lexical ranking's top 10 (of the 50
    candidates a search asks it for) its bound on candidates keeps, against
    every word drawing; the mean over the first KEPT_QUESTIONS questions
    that find anything (every word drawing ranks every passage holding
    `the`: 2 s a question)."""
    django_setup(proj)
    from files.models import File
    from files.selectors import search_bm25_postgresql as bm25
    from files.selectors.search_lexical import passages_ranked_lexically
    from files.selectors.searched_files import SearchedFiles

    files = File.objects.filter(bot_id=bot_id)

    def ranked() -> tuple[list[list[str]], float]:
        found, spent = [], []
        for question in asked[:KEPT_QUESTIONS]:
            started = time.perf_counter()
            searched = SearchedFiles(files)
            found.append(passages_ranked_lexically(files=searched, query=question, limit=50)[:10])
            spent.append((time.perf_counter() - started) * 1000)
        return found, statistics.median(spent)

    bounded, bounded_p50 = ranked()
    bound = bm25.CANDIDATE_PASSAGES
    bm25.CANDIDATE_PASSAGES = 10**12
    try:
        every, every_p50 = ranked()
    finally:
        bm25.CANDIDATE_PASSAGES = bound
    kept = [len(set(a) & set(b)) / len(a) for a, b in zip(every, bounded, strict=True) if a]
    return (
        f"  lexical top 10 kept by the bound ({bound:,} passages) ÷ every word drawing:"
        f" {statistics.mean(kept):.3f} (min {min(kept):.2f});"
        f" in-process p50 {bounded_p50:.2f} ms ÷ {every_p50:.2f} ms"
    )


def line(label: str, searched: list[float], paged: list[float], empty: int) -> str:
    p50, p99 = statistics.median(searched), percentile(searched, 99)
    page50 = statistics.median(paged)
    return (
        f"  {label:44} search p50 {p50:6.2f} p99 {p99:7.2f} ms  page p50 {page50:5.2f} ms"
        f"  ÷ page {p50 / page50:5.2f}  empty {empty}"
    )


def main() -> int:
    args = parse_args()
    machine.start()
    prose = Prose()
    asked = questions(prose, args.queries)
    with project("bench_files_search", keep=args.keep) as proj:
        bot = proj.demo["botId"]
        log(f"loading {args.passages:,} passages of the demo bot")
        seeded = {row[0] for row in proj.connect().execute("SELECT id FROM files_file")}
        demo_files = files_made(proj, bot, FILES_PER_BOT, "demo")
        passages_loaded(proj, demo_files, args.passages, prose)
        vectors_loaded(proj, demo_files)
        with servers.web_server("serve:FILE_SEARCH_SEMANTIC=false", proj) as web:
            client = Client(web.port, proj.demo["tokens"]["developer"])
            client.seeded = seeded
            rounds(client, bot, demo_files, asked[:20], 1)  # warm-up
            lexical = rounds(client, bot, demo_files, asked, args.rounds)
            print(line("the same, lexical ranking alone", *lexical), flush=True)
        failures = client.failures
        with servers.web_server("serve", proj) as web:
            client = Client(web.port, proj.demo["tokens"]["developer"])
            client.seeded = seeded
            rounds(client, bot, demo_files, asked[:20], 1)  # warm-up
            alone = rounds(client, bot, demo_files, asked, args.rounds)
            print(line(f"demo bot, {args.passages:,} passages alone", *alone), flush=True)
            kept = top_kept(proj, bot, asked)
            print(kept, flush=True)
            others = make_bots(proj, [""] * (args.bots - 1))
            each = (args.total - args.passages) // len(others)
            log(f"loading {each * len(others):,} passages of {len(others)} more bots")
            for other in others:
                other_files = files_made(proj, other, FILES_PER_BOT, other)
                passages_loaded(proj, other_files, each, prose)
                vectors_loaded(proj, other_files)
            small_files = [
                row[0]
                for row in proj.connect().execute(
                    "SELECT id FROM files_file WHERE bot_id = %s", [others[0]]
                )
            ]
            rounds(client, bot, demo_files, asked[:20], 1)
            among = rounds(client, bot, demo_files, asked, args.rounds)
            small = rounds(client, others[0], small_files, asked, args.rounds)
        failures += client.failures
        with servers.web_server("serve:FILE_SEARCH_SEMANTIC=false", proj) as web:
            client = Client(web.port, proj.demo["tokens"]["developer"])
            client.seeded = seeded
            rounds(client, bot, demo_files, asked[:20], 1)  # warm-up
            among_lexical = rounds(client, bot, demo_files, asked, args.rounds)
    print(f"\nRESULT files_search: {args.queries} questions x {args.rounds} rounds, limit 10")
    print(line(f"demo bot, {args.passages:,} passages alone", *alone))
    print(line("the same, lexical ranking alone", *lexical))
    print(line(f"demo bot among {args.total:,} passages", *among))
    print(line("the same, lexical ranking alone", *among_lexical))
    print(line(f"a bot of {each:,} among them", *small))
    ratio = statistics.median(among[0]) / statistics.median(alone[0])
    print(f"  demo bot among them ÷ alone, p50: {ratio:.2f} (target <= 1.2)")
    print(kept)
    print("  targets: p50 <= 50 ms, p99 <= 150 ms, ÷ page <= 10")
    return verdict(failures + client.failures, "CORRECTNESS CHECKS PASSED")


if __name__ == "__main__":
    sys.exit(main())
