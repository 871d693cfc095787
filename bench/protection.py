"""What the request protections cost, and how exact the rate limit is: rate
limits (one Redis round trip per runtime/admin request) and Idempotency-Key
(a claimed and stored answer per keyed POST), on PostgreSQL + Redis.

    .venv/bin/python bench/protection.py [--duration 10] [--accuracy-duration 20] [--policy 6000]

A fresh database bench_protection (migrated, seeded), Redis database 13
(BENCH_PROTECTION_REDIS_URL) as broker, live-stream bus and so rate limiter
(RATE_LIMIT_REDIS_URL defaults to the bus). Every server is
platform_site/Procfile's `web:` line exactly as `make run` starts it
(python -m platform_site.serve: one process per core, access log on).

1. Cost per request, in the same run: create event (POST /v1/chat/events,
   --connections keep-alive connections, wrk with one Lua script for all three)
   served in three configurations, interleaved A B C A B C (--rounds 2), each
   on a fresh server: a --warmup, then --duration seconds:
   - A `serve:RATE_LIMIT_ENABLED=0`: no limit (the baseline);
   - B `serve`: limits on, the demo workspace's and its tokens' limits set
     (through the ORM) so high that nothing is refused;
   - C `serve`, a unique Idempotency-Key on every request (the thread's
     number and a counter).
   Before each phase one urllib request checks the configuration: A answers
   without a RateLimit header; B with RateLimit and RateLimit-Policy naming
   the limits set; C's key sent twice gives one event and a replay. C is
   skipped, with a message, when the IdempotencyKey model or its table is
   missing, or the key is not honoured yet.
   Per configuration: requests/s (mean of its rounds) and the server's CPU
   per request (also Redis's and PostgreSQL's); B/A and C/A of both. Target
   (reported): B and C keep at least 95% of A's throughput.
2. Accuracy under concurrent load: `serve` with WEB_CONCURRENCY=2 (two web
   processes sharing the Redis limiter), the demo workspace's limit set to
   --policy a minute (GCRA: a burst of that many, then one every 60 s /
   policy), its tokens' ceiling out of the way, the counter quiet (its keys
   deleted). After a warm-up of both processes by another workspace, two wrk
   processes hammer it for --accuracy-duration seconds. Expected allowed =
   policy + (t_last - t_first) / (60 s / policy), t_first and t_last the
   created_at of the first and last stored event; allowed = stored events.
   Then the same on the limiter alone: two Python processes calling
   RedisLimiter.hit([Policy(...)]) in a loop, timed by the host's clock (the
   clock Redis's TIME reads too). Target (reported): |error| <= 1%.

Checks (exit 1 when one fails): in 1, every answer 201, no socket error,
stored events = 201s (+ at most one request in flight per connection when wrk
stops), every B and C answer with a RateLimit header and none of A's, Redis
running at least one (limiter) script per B and C request, and for C one
stored idempotency key per event, none left unfinished; in 2, every answer
201 or 429, stored events = 201s (+ in flight), both web processes served,
Redis answered every hit, and never more than 10% over the expected count
(far beyond timing noise: a limiter not shared between the processes lets
through about twice as many). An accuracy run that refused nothing (the
burst never used up: a slow machine, a short run) is INCONCLUSIVE, not failed.
Nothing asserts on time.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import api, cli, load, machine, servers  # noqa: E402
from harness.project import (  # noqa: E402
    HIGH_LIMIT,
    ROOT,
    Project,
    project,
    redis_forgetting,
    redis_script_calls,
)
from harness.report import background_warning, failed_lines, indent, log, mean  # noqa: E402

DB = "bench_protection"
# No other benchmark or test uses database 13.
REDIS_URL = os.environ.get("BENCH_PROTECTION_REDIS_URL", "redis://127.0.0.1:6379/13")
# platform_site.api.rate_limit keys its counters by database name.
LIMITER_PREFIX = f"ratelimit:{DB}:"
DIRECT_PREFIX = "bench-protection:direct:"
ACCURACY_TYPE = "bench.rate_limit_accuracy"
TARGET_RATIO = 0.95
TARGET_ERROR = 0.01
GROSS_EXCESS = 0.10  # allowed this far over the expected count fails the run


@dataclass(frozen=True)
class Config:
    name: str  # A, B, C
    label: str
    server: str  # as web_tier.start names it
    keyed: bool  # an Idempotency-Key on every request
    limited: bool  # RateLimit headers expected


CONFIGS = (
    Config("A", "limits off", "serve:RATE_LIMIT_ENABLED=0", keyed=False, limited=False),
    Config("B", "limits on", "serve", keyed=False, limited=True),
    Config("C", "limits on + Idempotency-Key", "serve", keyed=True, limited=True),
)

# ---------------------------------------------------------------- Redis


def redis_keys() -> contextlib.AbstractContextManager[redis.Redis]:
    """A client of the run's Redis database; the limiter's counters, the
    direct check's and the run's Celery queue deleted before and after."""
    queue = os.environ["CELERY_QUEUE"]
    return redis_forgetting(REDIS_URL, [f"{LIMITER_PREFIX}*", f"{DIRECT_PREFIX}*", f"*{queue}*"])


# ---------------------------------------------------------------- 1. cost per request


@dataclass
class Skip:
    reason: str = ""


def probe(
    config: Config,
    server: servers.WebServer,
    proj: Project,
    table: str | None,
    skip: Skip,
    failures: list[str],
) -> None:
    """One request that shows the server runs the configuration asked for."""
    demo, body = proj.demo, api.event_body()
    if not config.keyed:
        status, headers, _ = api.post_event(server.base_url, demo, body)
        policy, limits = headers.get("RateLimit-Policy"), headers.get("RateLimit")
        print(f"  probe {config.name}: {status}, RateLimit-Policy {policy}, RateLimit {limits}")
        if status != 201:
            failures.append(f"{config.name} probe: answered {status}")
        quotas = re.findall(r"\bq=(\d+)", policy or "")
        if config.limited and (not limits or not quotas or set(quotas) != {str(HIGH_LIMIT)}):
            failures.append(
                f"{config.name} probe: RateLimit headers missing, or a limit below {HIGH_LIMIT}"
            )
        if not config.limited and (limits is not None or policy is not None):
            failures.append(f"{config.name} probe: RateLimit headers with limits off")
        return
    before = api.stored_with_keys(proj, table)
    key = f"probe-{os.getpid()}-{time.monotonic_ns()}"
    first = api.post_event(server.base_url, demo, body, key)
    second = api.post_event(server.base_url, demo, body, key)
    after = api.stored_with_keys(proj, table)
    made = after["events"] - before["events"]
    replayed = second[1].get("Idempotent-Replayed")
    print(
        f"  probe {config.name}: the same key twice: {first[0]}, {second[0]} "
        f"(Idempotent-Replayed {replayed}), events made {made}, keys stored "
        f"{after['keys'] - before['keys']}"
    )
    keys = after["keys"] - before["keys"]
    if (first[0], second[0], made, keys) == (201, 201, 2, 0):
        skip.reason = (
            "the Idempotency-Key layer is not active on POST /v1/chat/events yet (one key "
            "sent twice made two events and no key row)"
        )
    elif (first[0], second[0], made, keys) != (201, 201, 1, 1) or first[2] != second[2]:
        failures.append(
            f"{config.name} probe: the same key twice answered {first[0]} then {second[0]} "
            f"(bodies {'equal' if first[2] == second[2] else 'different'}), made {made} "
            f"events and {keys} key rows"
        )


def cost_phase(
    config: Config,
    round_: int,
    run: api.WrkRun,
    redis_of: tuple[str | None, redis.Redis],
    skip: Skip,
) -> api.Measured | None:
    """One configuration's server, probed, warmed up, measured and checked;
    `redis_of`: the idempotency keys' table and the Redis client."""
    proj, tmp, failures = run.proj, run.tmp, run.failures
    table, client = redis_of

    def script(stage: str) -> Path:
        prefix = f"{os.getpid()}-{config.name}{round_}-{stage}-" if config.keyed else None
        path = tmp / f"{config.name}{round_}-{stage}.lua"
        return api.limited_event_script(path, proj.demo, key_prefix=prefix)

    with servers.web_server(config.server, proj) as server:
        probe(config, server, proj, table, skip, failures)
        if config.keyed and skip.reason:
            return None
        measured, done = run.event_phase(
            server,
            script,
            label=f"{config.name} ({config.label}) round {round_}",
            request=f"{config.name} round {round_}",
            # The limiter's counters expire within milliseconds under a limit
            # as high as HIGH_LIMIT: its scripts are counted instead.
            count=lambda: {
                **api.stored_with_keys(proj, table),
                "calls": redis_script_calls(client),
            },
            groups={"redis": machine.pids_named("redis-server")},
        )
    result, before, after, calls = done.result, done.before, done.after, done.stored["calls"]
    name = f"{config.name} round {round_}"
    expected_headed = result["requests"] if config.limited else 0
    if result["headed"] != expected_headed:
        failures.append(
            f"{name}: {result['headed']} of {result['requests']} answers with a RateLimit "
            f"header, {expected_headed} expected"
        )
    if config.limited and calls < result["requests"]:
        failures.append(
            f"{name}: Redis ran {calls} scripts for {result['requests']} requests: the limiter "
            f"is not in Redis ({REDIS_URL})"
        )
    if config.keyed:
        keys = after["keys"] - before["keys"]
        if keys != measured.created or after["keys_open"]:
            failures.append(
                f"{name}: {keys} idempotency keys stored for {measured.created} events, "
                f"{after['keys_open']} left without an answer"
            )
    print_cost_phase(
        config, measured, calls, after["keys"] - before["keys"] if config.keyed else None
    )
    return measured


def per_request_ms(m: api.Measured, group: str) -> float:
    return m.cpu.per_request_ms(group, m.wrk["requests"])


def print_cost_phase(config: Config, m: api.Measured, calls: int, keys: int | None) -> None:
    w = m.wrk
    stored_keys = "" if keys is None else f", idempotency keys stored {keys}"
    print(
        f"{m.request}, {config.label}: "
        f"{w['requests']} requests in {w['duration_us'] / 1e6:.1f} s = {m.rate:.0f} req/s, "
        f"p50 {w['p50_us'] / 1000:.2f} ms, p99 {w['p99_us'] / 1000:.2f} ms; {w['created']} x 201, "
        f"{w['headed']} with RateLimit; Redis scripts run {calls} (by any client); "
        f"events stored {m.created}{stored_keys}"
    )
    print(indent(m.cpu.report(m.request, w["requests"])))


# ---------------------------------------------------------------- 2. accuracy


@dataclass
class Accuracy:
    label: str
    policy: int
    allowed: int
    elapsed: float  # s, from the first allowed request to the last
    detail: str
    saturated: bool  # refusals seen: the burst was used up, the formula applies

    @property
    def expected(self) -> float:
        return self.policy + self.elapsed / (60 / self.policy)

    @property
    def error(self) -> float:
        return (self.allowed - self.expected) / self.expected

    def line(self) -> str:
        verdict = "met" if abs(self.error) <= TARGET_ERROR else "MISSED"
        if not self.saturated:
            verdict = "INCONCLUSIVE: nothing refused, the burst was never used up"
        return (
            f"{self.label}: policy {self.policy}/60 s, elapsed {self.elapsed:.3f} s, expected "
            f"{self.expected:.1f}, allowed {self.allowed}, error {self.error:+.2%} "
            f"(target |error| <= {TARGET_ERROR:.0%}: {verdict})"
        )

    def check(self, failures: list[str]) -> None:
        if self.allowed > self.expected * (1 + GROSS_EXCESS):
            failures.append(f"{self.label}: {self.allowed} allowed, {self.expected:.0f} expected")


def hammer_http(
    run: api.WrkRun, client: redis.Redis, scripts: tuple[Path, Path]
) -> tuple[list[dict[str, int]], list[int], machine.CpuUse]:
    """Two web processes sharing the limiter, warmed up by another workspace,
    then two wrk processes at once: their summaries, the connections each web
    process held midway, the CPU."""
    args, conns = run.args, run.args.accuracy_connections
    with servers.procfile_web(run.proj, workers=2, env={"WEB_CONCURRENCY": "2"}) as server:
        url = f"{server.base_url}/v1/chat/events"
        log(f"accuracy: warm-up by another workspace, {args.warmup:g} s")
        load.run_wrk(
            run.wrk, url, scripts[0], connections=2 * conns, threads=1, seconds=args.warmup
        )
        machine.wait_for_quiet(args.quiet_wait)
        for key in client.scan_iter(match=f"{LIMITER_PREFIX}workspace:*", count=1000):
            client.delete(key)  # a quiet counter
        groups = {f"web {pid}": [pid] for pid in server.worker_pids()}
        groups["redis"] = machine.pids_named("redis-server")
        spread: list[int] = []
        meter = machine.CpuMeter(groups)
        log(
            f"accuracy: 2 web processes, 2 wrk x {conns} connections, "
            f"{args.accuracy_duration:g} s, policy {args.policy}/min"
        )

        results = load.run_wrks(
            run.wrk,
            url,
            scripts[1],
            processes=2,
            connections=conns,
            seconds=args.accuracy_duration,
            midway=lambda: spread.extend(server.connections_by_worker()),
        )
        cpu = meter.stop()
        time.sleep(1)  # requests in flight when wrk stopped
    return results, spread, cpu


def check_answers(results: list[dict[str, int]], failures: list[str]) -> None:
    """Every answer of the accuracy run a 201 or a 429, no socket error."""
    for index, r in enumerate(results, 1):
        print(
            f"  wrk {index}: {r['requests']} answers in {r['duration_us'] / 1e6:.1f} s: "
            f"{r['created']} x 201, {r['limited']} x 429, {r['other'] - r['limited']} other; "
            f"socket errors connect/read/write/timeout {r['err_connect']}/{r['err_read']}/"
            f"{r['err_write']}/{r['err_timeout']}"
        )
        if r["other"] != r["limited"] or r["created"] + r["limited"] != r["requests"]:
            failures.append(f"accuracy wrk {index}: answers other than 201 and 429: {r}")
        if any(r[error] for error in load.SOCKET_ERRORS):
            failures.append(f"accuracy wrk {index}: socket errors: {r}")


def http_accuracy(run: api.WrkRun, client: redis.Redis) -> Accuracy:
    """2: the demo workspace's limit at --policy, hammered over HTTP."""
    proj, failures, conns = run.proj, run.failures, run.args.accuracy_connections
    api.set_limits(proj, workspace=run.args.policy, token=HIGH_LIMIT)
    # Another workspace warms both processes; its counters are its own.
    warm = api.limited_event_script(run.tmp / "accuracy-warm.lua", proj.demo, token="outsider")
    hammering = api.limited_event_script(
        run.tmp / "accuracy.lua", proj.demo, event_type=ACCURACY_TYPE
    )
    results, spread, cpu = hammer_http(run, client, (warm, hammering))
    with proj.connect(autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*), min(created_at), max(created_at) FROM events_event WHERE type = %s",
            (ACCURACY_TYPE,),
        ).fetchone()
    assert row is not None
    allowed, first, last = int(row[0]), row[1], row[2]
    elapsed = (last - first).total_seconds() if allowed else 0.0
    created = sum(r["created"] for r in results)
    refused = sum(r["limited"] for r in results)
    check_answers(results, failures)
    print(f"  client connections held by each web process midway: {spread}")
    print(indent(cpu.report("the accuracy phase", created + refused)))
    if not 0 <= allowed - created <= 2 * conns:
        failures.append(f"accuracy: {allowed} events stored but {created} answered 201")
    if len(spread) != 2 or min(spread) == 0:
        failures.append(f"accuracy: the load did not reach both web processes: {spread}")
    return Accuracy(
        "HTTP, 2 web processes, 2 wrk",
        run.args.policy,
        allowed,
        elapsed,
        f"{created} x 201, {refused} x 429, stored {allowed}",
        saturated=refused > 0,
    )


@dataclass
class Hammered:
    hits: int = 0
    allowed: int = 0
    unknown: int = 0  # the limiter could not tell (Redis did not answer in time)
    first: float = float("inf")
    last: float = float("-inf")


def hammer(key: str, limit: int, seconds: float, start: Any, results: Any) -> None:
    """A process calling the limiter as fast as it answers (in a child process)."""
    sys.path.insert(0, str(ROOT))
    from platform_site.api.rate_limit import Policy, RedisLimiter

    limiter = RedisLimiter(REDIS_URL, prefix=DIRECT_PREFIX)
    policy = Policy("workspace", key, limit)
    done = Hammered()
    start.wait()
    stop_at = time.monotonic() + seconds
    while time.monotonic() < stop_at:
        sent = time.time()
        decision = limiter.hit([policy])
        answered = time.time()
        done.hits += 1
        if decision is None:
            done.unknown += 1
        elif decision.allowed:
            done.allowed += 1
            done.first = min(done.first, (sent + answered) / 2)
            done.last = (sent + answered) / 2
    results.put(done)


def direct_accuracy(args: argparse.Namespace, client: redis.Redis, failures: list[str]) -> Accuracy:
    """The limiter alone from two processes: the algorithm without HTTP in between."""
    # Redis's TIME and this host's clock are one clock (Redis runs here): shown.
    seconds, micros = client.time()
    offset = time.time() - (seconds + micros / 1e6)
    context = multiprocessing.get_context("fork")
    start, results = context.Barrier(2), context.Queue()
    key = f"{os.getpid()}-{time.time_ns()}"
    log(f"limiter alone: 2 processes, {args.accuracy_duration:g} s, policy {args.policy}/min")
    processes = [
        context.Process(
            target=hammer,
            args=(key, args.policy, args.accuracy_duration, start, results),
            daemon=True,
        )
        for _ in range(2)
    ]
    for process in processes:
        process.start()
    done: list[Hammered] = []
    try:
        done += [results.get(timeout=args.accuracy_duration + 60) for _ in processes]
    finally:
        for process in processes:
            process.join(timeout=10 if len(done) == len(processes) else 0)
            if process.is_alive():
                process.terminate()
                process.join()
    hits = sum(d.hits for d in done)
    allowed = sum(d.allowed for d in done)
    unknown = sum(d.unknown for d in done)
    first, last = min(d.first for d in done), max(d.last for d in done)
    print(
        f"  limiter alone: {hits} hits ({', '.join(str(d.hits) for d in done)} per process), "
        f"{allowed} allowed, {unknown} unanswered by Redis; host clock - Redis TIME "
        f"{offset * 1000:+.2f} ms"
    )
    if unknown:
        failures.append(f"limiter alone: {unknown} hits not answered by Redis (let through)")
    return Accuracy(
        "limiter alone, 2 processes",
        args.policy,
        allowed,
        last - first if allowed else 0.0,
        f"{hits} hits",
        saturated=allowed < hits,
    )


# ---------------------------------------------------------------- report


def report(
    measured: dict[str, list[api.Measured]],
    accuracies: list[Accuracy],
    skip: Skip,
    conns: int,
) -> None:
    print()
    print("RESULT protection")
    rate = {name: mean([m.rate for m in ms]) for name, ms in measured.items()}
    cpu = {name: mean([m.server_ms_per_request for m in ms]) for name, ms in measured.items()}
    for config in CONFIGS:
        ms = measured.get(config.name, [])
        if not ms:
            if config.name == "C" and skip.reason:
                print(f"  C {config.label}: SKIPPED: {skip.reason}")
            continue
        rounds = ", ".join(f"{m.rate:.0f}" for m in ms)
        line = (
            f"  {config.name} {config.label:28s} {rate[config.name]:7.0f} req/s ({rounds})  "
            f"serve CPU {cpu[config.name]:.3f} ms/request, Redis "
            f"{mean([per_request_ms(m, 'redis') for m in ms]):.3f}, PostgreSQL "
            f"{mean([per_request_ms(m, 'postgres') for m in ms]):.3f}"
        )
        print(line)
    for name in ("B", "C"):
        if name in rate and "A" in rate:
            ratio = rate[name] / rate["A"]
            verdict = "met" if ratio >= TARGET_RATIO else "MISSED"
            print(
                f"  {name}/A: throughput {ratio:.3f} (target >= {TARGET_RATIO}: {verdict}), "
                f"serve CPU per request {cpu[name] / cpu['A']:.3f}"
            )
    background_warning(
        [
            f"{m.request} {m.cpu.other:.2f}"
            for ms in measured.values()
            for m in ms
            if m.cpu.other > machine.BACKGROUND_LIMIT
        ]
    )
    if measured:
        print(f"  ({conns} keep-alive connections; rounds interleaved A B C)")
    for accuracy in accuracies:
        print(f"  {accuracy.line()}; {accuracy.detail}")


# ---------------------------------------------------------------- main


def parse_args() -> argparse.Namespace:
    parser = cli.parser(__doc__)
    cli.add_rounds(parser, rounds=2, configs="A B C", what="cost phase")
    parser.add_argument(
        "--accuracy-duration",
        type=float,
        default=20,
        help="seconds of each accuracy run; over HTTP the server must use up the policy's "
        "burst within it (else INCONCLUSIVE)",
    )
    parser.add_argument(
        "--accuracy-connections",
        type=int,
        default=8,
        help="connections of each of the two wrk processes of the accuracy run",
    )
    parser.add_argument(
        "--policy", type=int, default=6000, help="the workspace's limit a minute, accuracy"
    )
    parser.add_argument(
        "--phases",
        default="cost,accuracy,limiter",
        help="any of cost (1), accuracy (2, over HTTP), limiter (2, the limiter alone)",
    )
    args = parser.parse_args()
    args.phases = set(args.phases.split(","))
    if not 1 <= args.policy <= HIGH_LIMIT // 10:
        parser.error(f"--policy must be between 1 and {HIGH_LIMIT // 10}")
    return args


@dataclass
class Bench:
    args: argparse.Namespace
    wrk: str
    failures: list[str] = field(default_factory=list)
    measured: dict[str, list[api.Measured]] = field(default_factory=dict)
    accuracies: list[Accuracy] = field(default_factory=list)
    skip: Skip = field(default_factory=Skip)

    def cost(self, proj: Project, tmp: Path, client: redis.Redis) -> None:
        """1: A B C interleaved for --rounds rounds."""
        table, self.skip.reason = api.idempotency_table(proj)
        api.set_limits(proj, workspace=HIGH_LIMIT, token=HIGH_LIMIT)
        for round_ in range(1, self.args.rounds + 1):
            for config in CONFIGS:
                if config.keyed and self.skip.reason:
                    log(f"C skipped: {self.skip.reason}")
                    continue
                run = api.WrkRun(self.args, proj, self.wrk, tmp, self.failures)
                m = cost_phase(config, round_, run, (table, client), self.skip)
                if m is not None:
                    self.measured.setdefault(config.name, []).append(m)

    def accuracy(self, accuracy: Accuracy) -> None:
        accuracy.check(self.failures)
        self.accuracies.append(accuracy)

    def over_http(self) -> None:
        """1 and 2 over HTTP, on the run's database."""
        with (
            tempfile.TemporaryDirectory(prefix="bench-protection-") as tmp,
            redis_keys() as client,
            project(DB, redis_url=REDIS_URL) as proj,
        ):
            # The bus, so the limiter too (RATE_LIMIT_REDIS_URL's default).
            proj.env["LIVE_STREAM_REDIS_URL"] = REDIS_URL
            if "cost" in self.args.phases:
                self.cost(proj, Path(tmp), client)
            if "accuracy" in self.args.phases:
                run = api.WrkRun(self.args, proj, self.wrk, Path(tmp), self.failures)
                self.accuracy(http_accuracy(run, client))


def main() -> int:
    args = parse_args()
    wrk = load.start_wrk_bench(
        "== protection: rate limits and Idempotency-Key, cost per request and accuracy"
    )
    print(f"redis: {REDIS_URL}; server: platform_site/Procfile web (python -m platform_site.serve)")
    bench = Bench(args, wrk)
    # seed_demo enqueues the demo file's indexing: to a queue of the run's own.
    os.environ["CELERY_QUEUE"] = f"bench-protection-{os.getpid()}"
    if args.phases & {"cost", "accuracy"}:
        bench.over_http()
    if "limiter" in args.phases:
        with redis_keys() as client:
            bench.accuracy(direct_accuracy(args, client, bench.failures))
    report(bench.measured, bench.accuracies, bench.skip, args.connections)
    return failed_lines(bench.failures, "  checks: all passed")


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
