"""Work per request of the hot routes: this tree against another revision, same run.

For a change that should not touch the cost of a request (a reorganisation,
a new base class), the two trees serve the same requests in-process through
Django's test Client, full middleware stack, on the embedded defaults
(`make run`'s SQLite), with the demo `seed_demo` makes and the rate limiter
on with quotas above the load. Figures per route:

- Python function calls per request (cProfile) and SQL statements per
  request: deterministic, so a difference of one call is real;
- CPU µs per request (process time, so other processes' load counts less),
  the median of interleaved passes: base, this, this, base, ...

    python bench/route_cost.py --base REV [--passes 6] [--requests 150]

REV is checked out in a temporary git worktree that shares this tree's
virtualenv: a revision whose dependencies differ will not run there. (The
editable install may find there a module only this tree has, such as a
template tag library Django looks for; no measured route imports one.)
"""

import cProfile
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import cli, machine
from harness.project import PYTHON, RATE_LIMITS_OUT_OF_REACH, ROOT
from harness.report import log, median

# The limiter on (its cost is part of a request), its quotas out of reach.
ENV = {**RATE_LIMITS_OUT_OF_REACH, "RATE_LIMIT_ENABLED": "true", "LOG_LEVEL": "WARNING"}
WARMUP = 30
PROFILED = 50


def routes(demo: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    """Each hot route as one call of the test Client, answered 2xx."""
    from django.test import Client

    client = Client()
    token = f"Bearer {demo['tokens']['owner']}"
    runtime = {"Authorization": token, "x-bot-id": demo["botId"]}
    admin = {"Authorization": token, "x-workspace-id": demo["workspaceId"]}
    chat = {"x-user-key": demo["userKey"]}
    conversation = demo["conversationId"]
    chat_url = f"/chat/{demo['webhookId']}"
    event = json.dumps({"type": "bench:ping", "payload": {"n": 1}, "conversationId": conversation})
    message = json.dumps(
        {"conversationId": conversation, "payload": {"type": "text", "text": "hi"}}
    )
    reply = json.dumps(
        {
            "conversationId": conversation,
            "userId": demo["botId"],
            "type": "text",
            "payload": {"type": "text", "text": "hello"},
            "tags": {},
        }
    )

    def post(path: str, body: str, headers: dict[str, str]) -> Callable[[], Any]:
        return lambda: client.post(path, body, content_type="application/json", headers=headers)

    def get(path: str, headers: dict[str, str]) -> Callable[[], Any]:
        return lambda: client.get(path, headers=headers)

    return {
        "POST /v1/chat/events": post("/v1/chat/events", event, runtime),
        "GET /v1/files/{id}/passages": get(f"/v1/files/{demo['fileId']}/passages", runtime),
        "POST /v1/chat/messages": post("/v1/chat/messages", reply, runtime),
        "GET /v1/chat/conversations/{id}": get(f"/v1/chat/conversations/{conversation}", runtime),
        "POST {chat}/messages": post(f"{chat_url}/messages", message, chat),
        "GET {chat}/conversations/{id}/messages": get(
            f"{chat_url}/conversations/{conversation}/messages?limit=20", chat
        ),
        "GET /v1/chat/events?pageSize=20": get("/v1/chat/events?pageSize=20", runtime),
        "GET /v1/admin/bots": get("/v1/admin/bots", admin),
    }


def worker(demo_path: str, mode: str, passes: int, requests: int) -> None:
    """In a tree (cwd): print one JSON object of figures per route."""
    sys.path.insert(0, os.getcwd())
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")
    import django

    django.setup()
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    calls = routes(json.loads(Path(demo_path).read_text()))
    out: dict[str, Any] = {}
    for name, call in calls.items():
        answer = call()
        if not 200 <= answer.status_code < 300:
            raise SystemExit(f"{name}: {answer.status_code} {answer.content[:300]!r}")
        for _ in range(WARMUP):
            call()
        if mode == "count":
            profile = cProfile.Profile()
            with CaptureQueriesContext(connection) as queries:
                profile.enable()
                for _ in range(PROFILED):
                    call()
                profile.disable()
            out[name] = {
                "calls": pstats.Stats(profile).total_calls / PROFILED,  # type: ignore[attr-defined]
                "queries": len(queries.captured_queries) / PROFILED,
            }
        else:
            samples = []
            for _ in range(passes):
                start = time.process_time()
                for _ in range(requests):
                    call()
                samples.append((time.process_time() - start) / requests * 1e6)
            out[name] = samples
    print(json.dumps(out))


class Tree:
    """A tree with its own data directory, migrated and seeded with the demo."""

    def __init__(self, path: Path, label: str, data: Path) -> None:
        self.path, self.label, self.data = path, label, data
        self.env = {**os.environ, **ENV, "DATA_DIR": str(data)}
        for name in ("DATABASE_URL", "CELERY_BROKER_URL", "PROMETHEUS_MULTIPROC_DIR"):
            self.env.pop(name, None)
        data.mkdir(parents=True)
        subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], cwd=path, env=self.env, check=True)
        demo = subprocess.run(
            [PYTHON, "manage.py", "seed_demo", "--json", "--webhook-url", "http://127.0.0.1:9/"],
            cwd=path,
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        self.demo = data / "demo.json"
        self.demo.write_text(demo)

    def run(self, mode: str, passes: int, requests: int) -> dict[str, Any]:
        command = [PYTHON, __file__, "--worker", str(self.demo), mode, str(passes), str(requests)]
        out = subprocess.run(
            command, cwd=self.path, env=self.env, check=True, capture_output=True, text=True
        )
        return json.loads(out.stdout.strip().splitlines()[-1])


def report(
    base: str,
    args: Any,
    counts: list[dict[str, Any]],
    times: list[dict[str, list[float]]],
) -> None:
    print(f"base: {base}; {args.passes} interleaved passes of {args.requests} requests a route")
    print(f"{'route':42} {'calls':>15} {'SQL':>10} {'CPU µs (median)':>24}")
    for name in counts[0]:
        before, after = counts[0][name], counts[1][name]
        cpu_before, cpu_after = (median(times[i][name]) for i in (0, 1))
        calls = f"{before['calls']:6.0f} → {after['calls']:6.0f}"
        sql = f"{before['queries']:3.1f} → {after['queries']:3.1f}"
        cpu = f"{cpu_before:6.0f} → {cpu_after:6.0f} ({cpu_after / cpu_before:.3f})"
        print(f"{name:42} {calls:>15} {sql:>10} {cpu:>24}")


def main() -> None:
    parser = cli.parser(__doc__ or "")
    parser.add_argument("--base", help="the revision to compare with (required but for --worker)")
    parser.add_argument("--passes", type=int, default=6, help="interleaved timing passes per tree")
    parser.add_argument("--requests", type=int, default=150, help="requests per route per pass")
    parser.add_argument("--worker", nargs=4, help="(internal) run in a tree: DEMO MODE PASSES N")
    cli.add_quiet_wait(parser, default=60)
    args = parser.parse_args()
    if args.worker:
        demo, mode, passes, requests = args.worker
        worker(demo, mode, int(passes), int(requests))
        return
    if not args.base:
        parser.error("--base REV is required")
    machine.start("Route cost: work per request, this tree against --base, same run")
    revision = subprocess.run(
        ["git", "rev-parse", "--short", args.base],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    scratch = Path(tempfile.mkdtemp(prefix="route-cost-"))
    checkout = scratch / "base"
    subprocess.run(
        ["git", "worktree", "add", "--detach", "-q", str(checkout), revision], cwd=ROOT, check=True
    )
    try:
        trees = [
            Tree(checkout, f"base {revision}", scratch / "data-base"),
            Tree(ROOT, "this tree", scratch / "data-this"),
        ]
        log("counting calls and statements")
        counts = [tree.run("count", 0, 0) for tree in trees]
        machine.wait_for_quiet(args.quiet_wait)
        times: list[dict[str, list[float]]] = [{}, {}]
        for index in range(args.passes):
            order = (0, 1) if index % 2 == 0 else (1, 0)
            for which in order:
                for name, samples in trees[which].run("time", 1, args.requests).items():
                    times[which].setdefault(name, []).extend(samples)
        report(trees[0].label, args, counts, times)
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(checkout)], cwd=ROOT, check=False
        )
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
