"""What an Idempotency-Key costs a create: create event (POST /v1/chat/events)
with a unique key on every request against the same without one, same run,
as `make run` serves it (the Procfile's web line, PostgreSQL and Redis, the
rate limiter on with its quotas out of reach).

    .venv/bin/python bench/idempotency_cost.py [--before-tree DIR] [--rounds 3]
        [--duration 10] [--profile 8] [--round-trips 200]

A fresh database bench_idempotency (migrated, seeded), Redis database 12
(BENCH_IDEMPOTENCY_REDIS_URL) as broker, live-stream bus and rate limiter.

Phases, each on a fresh server (the Procfile's web line: one process a
core), each after a quiet machine: `unkeyed` and `keyed` (a unique key a
request: the wrk thread and a counter), a --warmup and then --duration
seconds of wrk over --connections keep-alive connections. With
--before-tree (a checkout of an earlier commit, .venv linked in) the same
two from that tree's code (`before unkeyed`, `before keyed`). --rounds
rounds, the order of the phases rotated each round.

Figures per phase: requests/s, the server's CPU per request (and
PostgreSQL's); per tree keyed / unkeyed of the rounds' means and round by
round. Target (reported): keyed / unkeyed >= 0.90.

--round-trips N: for each tree and configuration, N requests one at a time
while strace follows the web processes: the messages they send to
PostgreSQL (and to Redis) per request, i.e. the round trips.
--profile S: for each tree and configuration, py-spy samples the web
processes for S seconds under the same load (not a measured phase): where
the time goes, by frames of interest and by function (--profile-gil: the
thread holding the GIL only, i.e. Python's CPU; --profile-dir keeps the
raw stacks).

Checks (exit 1 when one fails): every answer 201, no socket error, events
stored = 201s (+ in flight), a key sent twice makes one event and is
replayed, one kept answer per keyed event. Nothing asserts on time.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import api, cli, load, machine, servers, stacks  # noqa: E402
from harness.project import ROOT, Project, project, redis_forgetting  # noqa: E402
from harness.report import background_warning, failed_lines, mean  # noqa: E402

DB = "bench_idempotency"
REDIS_URL = os.environ.get("BENCH_IDEMPOTENCY_REDIS_URL", "redis://127.0.0.1:6379/12")
TARGET = 0.90

# Frames whose share of the web processes' samples the profile reports.
FRAMES_OF_INTEREST = (
    "idempotent_run",
    "rendered",
    "request_fingerprint",
    "_answer_keep",
    "_answer_kept",
    "secret_seal",
    "get_db_prep_save",
    "__enter__ (django/db/transaction.py",
    "__exit__ (django/db/transaction.py",
    "set_autocommit",
    "commit (django/db/backends/base/base.py",
    "event_create",
    "row_insert",
    "rows_write",
    "execute (psycopg/cursor.py",
    "_start_query",
    "wait_c",
    "render (rest_framework/response.py",
    "render (django/template/response.py",
)


@dataclass(frozen=True)
class Config:
    tree: str  # "" (this tree) or "before"
    keyed: bool

    @property
    def name(self) -> str:
        return f"{self.tree + ' ' if self.tree else ''}{'keyed' if self.keyed else 'unkeyed'}"


@dataclass
class Phase:
    rate: float
    serve_ms: float
    postgres_ms: float
    background: float


@dataclass
class Bench:
    args: argparse.Namespace
    wrk: str
    proj: Project
    tmp: Path
    failures: list[str] = field(default_factory=list)
    phases: dict[str, list[Phase]] = field(default_factory=dict)

    @contextlib.contextmanager
    def server(self, config: Config) -> Iterator[servers.WebServer]:
        name = "serve-before" if config.tree else "serve"
        with servers.web_server(name, self.proj, before_tree=self.args.before_tree) as server:
            self.probe(config, server)
            yield server

    def probe(self, config: Config, server: servers.WebServer) -> None:
        """The key sent twice: one event, the second answer a replay."""
        if not config.keyed:
            return
        table = "bots_idempotencykey"
        before = api.stored_with_keys(self.proj, table)
        key = f"probe-{time.monotonic_ns()}"
        body = api.event_body()
        first = api.post_event(server.base_url, self.proj.demo, body, key)
        second = api.post_event(server.base_url, self.proj.demo, body, key)
        after = api.stored_with_keys(self.proj, table)
        made, keys = after["events"] - before["events"], after["keys"] - before["keys"]
        replayed = second[1].get("Idempotent-Replayed")
        if (first[0], second[0], made, keys, replayed) != (201, 201, 1, 1, "true") or (
            first[2] != second[2]
        ):
            self.failures.append(
                f"{config.name} probe: {first[0]}, {second[0]} (replayed {replayed}), "
                f"{made} events, {keys} keys"
            )

    def script(self, config: Config, round_: int, stage: str) -> Path:
        tag = config.name.replace(" ", "-")
        prefix = f"{os.getpid()}-{tag}{round_}-{stage}-" if config.keyed else None
        path = self.tmp / f"{tag}{round_}-{stage}.lua"
        return api.limited_event_script(path, self.proj.demo, key_prefix=prefix)

    def counts(self) -> dict[str, int]:
        return api.stored_with_keys(self.proj, "bots_idempotencykey")

    def measure(self, config: Config, round_: int) -> None:
        run = api.WrkRun(self.args, self.proj, self.wrk, self.tmp, self.failures)
        with self.server(config) as server:
            measured, done = run.event_phase(
                server,
                lambda stage: self.script(config, round_, stage),
                label=f"{config.name} round {round_}",
                request=f"{config.name} round {round_}",
                count=self.counts,
            )
        requests = measured.wrk["requests"]
        stored = done.stored
        if config.keyed and (stored["keys"] != measured.created or done.after["keys_open"]):
            self.failures.append(
                f"{config.name} round {round_}: {stored['keys']} keys for {measured.created} events"
            )
        phase = Phase(
            rate=measured.rate,
            serve_ms=measured.server_ms_per_request,
            postgres_ms=measured.cpu.per_request_ms("postgres", requests),
            background=measured.cpu.other,
        )
        self.phases.setdefault(config.name, []).append(phase)
        print(
            f"{config.name:16s} round {round_}: {phase.rate:7.1f} req/s, p50 "
            f"{measured.wrk['p50_us'] / 1000:.2f} ms, p99 {measured.wrk['p99_us'] / 1000:.2f} ms;"
            f" serve CPU {phase.serve_ms:.3f} ms/request, PostgreSQL {phase.postgres_ms:.3f};"
            f" background {phase.background:.2f} cores",
            flush=True,
        )

    # ------------------------------------------------------------ round trips

    def round_trips(self, config: Config) -> None:
        """N requests one at a time under strace: messages sent to PostgreSQL
        and Redis per request."""
        strace = shutil.which("strace")
        if strace is None:
            print("  round trips: strace not installed, skipped")
            return
        count = self.args.round_trips
        with self.server(config) as server:
            pids = server.worker_pids() if isinstance(server, servers.AsgiServer) else server.pids()
            body = api.event_body()
            for i in range(20):  # warm: every thread's connection opened
                key = f"rt-warm-{time.monotonic_ns()}-{i}" if config.keyed else None
                api.post_event(server.base_url, self.proj.demo, body, key)
            out = self.tmp / f"strace-{config.name.replace(' ', '-')}"
            tracers = [
                subprocess.Popen(
                    [strace, "-f", "-yy", "-qq", "-e", "trace=sendto,write,sendmsg",
                     "-o", f"{out}.{pid}", "-p", str(pid)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )
                for pid in pids
            ]  # fmt: skip
            time.sleep(1.0)
            for i in range(count):
                key = f"rt-{time.monotonic_ns()}-{i}" if config.keyed else None
                status = api.post_event(server.base_url, self.proj.demo, body, key)[0]
                if status != 201:
                    self.failures.append(f"round trips {config.name}: answered {status}")
            time.sleep(0.5)
            for tracer in tracers:
                tracer.terminate()
                tracer.wait()
        sent = {"5432": 0, "6379": 0}
        for path in out.parent.glob(out.name + ".*"):
            for line in path.read_text(errors="replace").splitlines():
                for port in sent:
                    if f"->127.0.0.1:{port}]" in line:
                        sent[port] += 1
        print(
            f"  round trips {config.name:16s}: {sent['5432'] / count:.2f} messages to "
            f"PostgreSQL, {sent['6379'] / count:.2f} to Redis per request ({count} requests)"
        )

    # ------------------------------------------------------------ profile

    def profile(self, config: Config) -> None:
        seconds = self.args.profile
        url = None
        with self.server(config) as server:
            url = f"{server.base_url}/v1/chat/events"
            pids = server.worker_pids() if isinstance(server, servers.AsgiServer) else server.pids()
            load.run_wrk(
                self.wrk, url, self.script(config, 0, "pwarm"), connections=16, threads=1,
                seconds=self.args.warmup,
            )  # fmt: skip
            out = self.tmp / f"spy-{config.name.replace(' ', '-')}"
            with stacks.recorded(pids, out, seconds, rate=250, gil=self.args.profile_gil):
                time.sleep(0.5)
                load.run_wrk(
                    self.wrk, url, self.script(config, 0, "pload"), connections=16, threads=1,
                    seconds=seconds,
                )  # fmt: skip
        keep = self.args.profile_dir
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            for path in stacks.files(out):
                shutil.copy(path, Path(keep) / path.name)
        print(f"  profile {config.name}:")
        print(profile_summary(out))


def profile_summary(out: Path, count: int = 20) -> str:
    """Shares of samples: the frames of interest (total), and the top functions."""
    read = stacks.samples(out)
    if not read.count:
        return "    (no samples)"
    lines = [f"    {read.count} samples; frames of interest (total):"]
    for wanted in FRAMES_OF_INTEREST:
        hits = sum(n for frame, n in read.total.items() if frame.startswith(wanted))
        if hits:
            lines.append(f"      {hits / read.count:6.1%}  {wanted}")
    lines.append("    own time:")
    lines += read.top(read.own, count, indent="      ")
    return "\n".join(lines)


def report(bench: Bench, configs: list[Config]) -> None:
    print()
    print("RESULT idempotency cost")
    for config in configs:
        ps = bench.phases.get(config.name, [])
        if not ps:
            continue
        rounds = ", ".join(f"{p.rate:.0f}" for p in ps)
        print(
            f"  {config.name:16s} {mean([p.rate for p in ps]):7.1f} req/s ({rounds})  serve CPU "
            f"{mean([p.serve_ms for p in ps]):.3f} ms/request, PostgreSQL "
            f"{mean([p.postgres_ms for p in ps]):.3f}"
        )
    for tree in ("before", ""):
        keyed = bench.phases.get(Config(tree, True).name)
        unkeyed = bench.phases.get(Config(tree, False).name)
        if not keyed or not unkeyed:
            continue
        ratio = mean([p.rate for p in keyed]) / mean([p.rate for p in unkeyed])
        per_round = ", ".join(
            f"{k.rate / u.rate:.3f}" for k, u in zip(keyed, unkeyed, strict=False)
        )
        cpu = mean([p.serve_ms for p in keyed]) / mean([p.serve_ms for p in unkeyed])
        verdict = "met" if ratio >= TARGET else "MISSED"
        print(
            f"  {tree or 'this tree'}: keyed / unkeyed {ratio:.3f} (rounds {per_round}; target >= "
            f"{TARGET}: {verdict}); serve CPU per request keyed / unkeyed {cpu:.3f}"
        )
    background_warning(
        [
            f"{name} {p.background:.2f}"
            for name, ps in bench.phases.items()
            for p in ps
            if p.background > machine.BACKGROUND_LIMIT
        ]
    )


def parse_args() -> argparse.Namespace:
    parser = cli.parser(__doc__)
    cli.add_rounds(parser, rounds=3, configs="the phases")
    parser.add_argument("--before-tree", default="", help="a checkout of an earlier commit")
    parser.add_argument("--profile", type=float, default=0, help="seconds of py-spy per config")
    parser.add_argument("--profile-dir", default="", help="keep py-spy's raw stacks here")
    parser.add_argument(
        "--profile-gil", action="store_true", help="sample the thread holding the GIL only"
    )
    parser.add_argument("--round-trips", type=int, default=0, help="requests under strace")
    parser.add_argument("--no-measure", action="store_true", help="profile / round trips only")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    wrk = load.start_wrk_bench("== Idempotency-Key: keyed against unkeyed create event")
    os.environ["CELERY_QUEUE"] = f"bench-idempotency-{os.getpid()}"
    trees = (["before"] if args.before_tree else []) + [""]
    configs = [Config(tree, keyed) for tree in trees for keyed in (False, True)]
    with (
        tempfile.TemporaryDirectory(prefix="bench-idempotency-") as tmp,
        redis_forgetting(REDIS_URL, ["ratelimit:*", f"*{os.environ['CELERY_QUEUE']}*"]),
        project(DB, redis_url=REDIS_URL) as proj,
    ):
        proj.env["LIVE_STREAM_REDIS_URL"] = REDIS_URL
        bench = Bench(args, wrk, proj, Path(tmp))
        if args.round_trips:
            for config in configs:
                bench.round_trips(config)
        if args.profile:
            for config in configs:
                bench.profile(config)
        if not args.no_measure:

            def phase(config: Config) -> Callable[[int], None]:
                return lambda number: bench.measure(config, number + 1)

            phases = [phase(config) for config in configs]
            load.rotated_rounds(args.rounds, phases)
    report(bench, configs)
    return failed_lines(bench.failures, "  checks: all passed")


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
