"""Growth through HTTP: the hot routes served by the Procfile's web line
with 10M events stored ÷ the same routes on a seeded database, in the same
run (issue 29's statements, as a client meets them).

    .venv/bin/python bench/event_growth.py --keep      # makes the two databases
    .venv/bin/python bench/event_growth_http.py [--rounds 40]

Uses the databases `event_growth.py --keep` left: bench_growth_big (10M
events over 30 days, the bench bot 333,335 of them, an attempt each) and
bench_growth_seeded (the same bench bot with a few hundred events). For each,
a token of the bench bot's workspace owner is made, and the Procfile's web
line serves it (one process: the two servers share the cores). Then
--rounds interleaved rounds, the databases in turn (their order alternating),
over one keep-alive connection each, each request timed:

- create event: POST /v1/chat/events;
- chat message: POST /v1/chat/messages (the bench bot writing in its
  conversation);
- get by id: GET /v1/chat/events/{id} of a random event of the bench bot
  (drawn as event_growth.py draws: 500 of its events, at random);
- list: GET /v1/chat/events?pageSize=20, then filtered by a type matching
  nothing and by status failed.

Figures: p50 and p99 per route and database, big ÷ seeded (target ≤ 1.3).
The claim and the record have no route: event_growth.py measures them.
Checks (exit 1): every answer 2xx, lists of 20 (the filtered ones as
stored)."""

from __future__ import annotations

import http.client
import json
import random
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import cli, machine, servers  # noqa: E402
from harness.project import ROOT, Project, project_env  # noqa: E402
from harness.report import log, verdict  # noqa: E402

DATABASES = {"seeded": "bench_growth_seeded", "big": "bench_growth_big"}
TARGET = 1.3
SAMPLE = 500


def parse_args() -> Any:
    parser = cli.parser(__doc__)
    parser.add_argument("--rounds", type=int, default=40)
    return parser.parse_args()


def kept_project(dbname: str, data_dir: Path) -> Project:
    """A project on a database made before (its demo not known here)."""
    return Project(dbname=dbname, data_dir=data_dir, env=project_env(dbname, data_dir))


def bench_setup(proj: Project) -> dict[str, Any]:
    """The bench bot (its user's chat id: bench-writer), its conversation and user, a new token
    of its workspace's owner, and SAMPLE of its events at random."""
    out = proj.manage(
        "shell",
        "-c",
        "import json;"
        "from bots.models import Bot, Conversation, Membership, User;"
        "from bots.services.tokens import access_token_create;"
        # Not the bot's row itself: its signing secret is encrypted with the
        # key of the data folder event_growth.py had, gone with it.
        "user = User.objects.get(chat_id='bench-writer');"
        "bot, workspace = Bot.objects.values_list('id', 'workspace_id').get(id=user.bot_id);"
        "owner = Membership.objects.get(workspace_id=workspace, role='owner').account;"
        "print(json.dumps({'bot': bot,"
        " 'conversation': Conversation.objects.filter(bot_id=bot).first().id,"
        " 'user': user.id,"
        " 'token': access_token_create(account=owner, name='bench')[1]}))",
    )
    found: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    with proj.connect(autocommit=True) as conn:
        found["events"] = [
            row[0]
            for row in conn.execute(
                "SELECT id FROM events_event WHERE bot_id = %s AND type <> 'bench.due'"
                " ORDER BY random() LIMIT %s",
                [found["bot"], SAMPLE],
            )
        ]
    return found


class Client:
    """One keep-alive connection to a served database, its requests timed."""

    def __init__(self, base_url: str, bench: dict[str, Any]) -> None:
        self.connection = http.client.HTTPConnection(base_url.removeprefix("http://"), timeout=30)
        self.headers = {
            "Authorization": f"Bearer {bench['token']}",
            "x-bot-id": bench["bot"],
            "Content-Type": "application/json",
        }
        self.bench = bench
        self.rng = random.Random(5)
        self.spent: dict[str, list[float]] = {}
        self.failures: list[str] = []

    def timed(self, name: str, method: str, path: str, body: Any = None) -> Any:
        payload = None if body is None else json.dumps(body)
        started = time.perf_counter()
        self.connection.request(method, path, payload, self.headers)
        answer = self.connection.getresponse()
        data = answer.read()
        self.spent.setdefault(name, []).append((time.perf_counter() - started) * 1000)
        if not 200 <= answer.status < 300:
            self.failures.append(f"{name}: {answer.status} {data[:200]!r}")
            return None
        return json.loads(data)

    def round(self) -> None:
        bench = self.bench
        self.timed("create event", "POST", "/v1/chat/events", {"type": "bench:http", "payload": {}})
        self.timed(
            "chat message",
            "POST",
            "/v1/chat/messages",
            {
                "conversationId": bench["conversation"],
                "userId": bench["user"],
                "type": "text",
                "payload": {"type": "text", "text": "hello"},
                "tags": {},
            },
        )
        event_id = self.rng.choice(bench["events"])
        self.timed("get by id", "GET", f"/v1/chat/events/{event_id}")
        page = self.timed("list", "GET", "/v1/chat/events?pageSize=20")
        if page is not None and len(page["events"]) != 20:
            self.failures.append(f"list: {len(page['events'])} events, not 20")
        nothing = self.timed(
            "list, type matching nothing", "GET", "/v1/chat/events?pageSize=20&type=never.sent"
        )
        if nothing is not None and nothing["events"]:
            self.failures.append("list, type matching nothing: found some")
        self.timed("list, status failed", "GET", "/v1/chat/events?pageSize=20&status=failed")


def report(clients: dict[str, Client]) -> float:
    print(
        f"\n{'route (ms)':30} {'seeded p50':>11} {'big p50':>9} {'big p99':>9} {'big/seeded':>11}"
    )
    worst = 0.0
    for name in clients["big"].spent:
        seeded = statistics.median(clients["seeded"].spent[name])
        big = clients["big"].spent[name]
        p99 = sorted(big)[min(len(big) - 1, int(len(big) * 0.99))]
        ratio = statistics.median(big) / seeded
        worst = max(worst, ratio)
        print(f"{name:30} {seeded:11.3f} {statistics.median(big):9.3f} {p99:9.3f} {ratio:11.2f}")
    return worst


def main() -> int:
    args = parse_args()
    machine.start()
    clients: dict[str, Client] = {}
    with ExitStack() as stack:
        for label, dbname in DATABASES.items():
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"{dbname}-")))
            proj = kept_project(dbname, data_dir)
            log(f"{label}: {dbname}, the bench bot and a token")
            bench = bench_setup(proj)
            server = stack.enter_context(
                servers.procfile_web(proj, workers=1, env={"WEB_CONCURRENCY": "1"})
            )
            clients[label] = Client(server.base_url, bench)
        for client in clients.values():  # warm-up: connections, caches of the process
            for _ in range(3):
                client.round()
            client.spent.clear()
        log(f"{args.rounds} rounds")
        order = list(clients.values())
        for n in range(args.rounds):
            for client in order if n % 2 == 0 else order[::-1]:
                client.round()
    failures = [failure for client in clients.values() for failure in client.failures]
    print(f"\nRESULT event_growth_http: {args.rounds} rounds, commit of this tree ({ROOT.name})")
    worst = report(clients)
    print(f"  worst big/seeded: {worst:.2f} (target <= {TARGET})")
    return verdict(failures, "CORRECTNESS CHECKS PASSED")


if __name__ == "__main__":
    sys.exit(main())
