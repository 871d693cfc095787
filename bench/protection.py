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
import json
import multiprocessing
import os
import re
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import Any

import redis
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
import chat_messages  # noqa: E402
import chat_stream  # noqa: E402
import create_event  # noqa: E402
import web_tier  # noqa: E402
from benchlib import log  # noqa: E402

DB = "bench_protection"
# No other benchmark or test uses database 13.
REDIS_URL = os.environ.get("BENCH_PROTECTION_REDIS_URL", "redis://127.0.0.1:6379/13")
# platform_site.api.rate_limit keys its counters by database name.
LIMITER_PREFIX = f"ratelimit:{DB}:"
DIRECT_PREFIX = "bench-protection:direct:"
# "Out of the way": a request every 6 µs. (A limit over 60,000,000 a minute
# makes rate_limit's interval 0 µs, and its quota arithmetic divides by it.)
HIGH_LIMIT = 10_000_000
JSON = "application/json"
ACCURACY_TYPE = "bench.rate_limit_accuracy"
TARGET_RATIO = 0.95
TARGET_ERROR = 0.01
GROSS_EXCESS = 0.10  # allowed this far over the expected count fails the run
BACKGROUND_LIMIT = 0.3


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

# One script for every phase: a `request` function builds each request, with
# an Idempotency-Key when KEY_PREFIX is a string. It counts the 201s, the
# 429s, every non-201 answer and the answers with a RateLimit header.
LOAD_LUA = """
local key_prefix = KEY_PREFIX
local threads = {}
local names = {"created", "limited", "other", "headed"}

function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end

function init(args)
  created, limited, other, headed, sent = 0, 0, 0, 0, 0
end

function request()
  if key_prefix then
    sent = sent + 1
    wrk.headers["Idempotency-Key"] = key_prefix .. tid .. "-" .. sent
  end
  return wrk.format()
end

function response(status, headers, body)
  created = created + (status == 201 and 1 or 0)
  limited = limited + (status == 429 and 1 or 0)
  other = other + (status ~= 201 and 1 or 0)
  for name, _ in pairs(headers) do
    if string.lower(name) == "ratelimit" then
      headed = headed + 1
      break
    end
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write("WRKJSON {")
  io.write(string.format('"requests":%d,"duration_us":%d,', summary.requests, summary.duration))
  for _, name in ipairs(names) do
    local total = 0
    for _, thread in ipairs(threads) do total = total + thread:get(name) end
    io.write(string.format('"%s":%d,', name, total))
  end
  io.write(string.format('"err_connect":%d,"err_read":%d,"err_write":%d,"err_timeout":%d,',
    e.connect, e.read, e.write, e.timeout))
  io.write(string.format('"p50_us":%d,"p99_us":%d}\\n',
    latency:percentile(50), latency:percentile(99)))
end
"""


# ---------------------------------------------------------------- requests


def event_body(event_type: str = create_event.EVENT_TYPE) -> str:
    return json.dumps(
        {"type": event_type, "payload": create_event.EVENT_PAYLOAD}, separators=(",", ":")
    )


def request_headers(token: str, bot_id: str) -> dict[str, str]:
    return {"Authorization": "Bearer " + token, "x-bot-id": bot_id, "Content-Type": JSON}


def load_script(
    path: Path, *, token: str, bot_id: str, body: str, key_prefix: str | None = None
) -> Path:
    lines = ['wrk.method = "POST"', f"wrk.body = {json.dumps(body)}"]
    lines += [
        f"wrk.headers[{json.dumps(name)}] = {json.dumps(value)}"
        for name, value in request_headers(token, bot_id).items()
    ]
    prefix = "nil" if key_prefix is None else json.dumps(key_prefix)
    path.write_text("\n".join(lines) + "\n" + LOAD_LUA.replace("KEY_PREFIX", prefix, 1))
    return path


def post_event(
    base_url: str, demo: dict[str, Any], body: str, key: str | None = None
) -> tuple[int, Message, bytes]:
    """One create event with urllib: status, headers, body."""
    headers = request_headers(demo["tokens"]["developer"], demo["botId"])
    if key is not None:
        headers["Idempotency-Key"] = key
    request = urllib.request.Request(
        base_url + "/v1/chat/events", data=body.encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


# ---------------------------------------------------------------- database, Redis


def set_limits(proj: benchlib.Project, *, workspace: int, token: int) -> None:
    """The demo workspace's limit and every token's own ceiling, through the ORM."""
    log(f"limits: workspace {workspace}/min, tokens {token}/min")
    proj.manage(
        "shell",
        "-c",
        "from bots.models import AccessToken, WorkspaceSettings\n"
        "WorkspaceSettings.objects.update_or_create(\n"
        f"    workspace_id={proj.demo['workspaceId']!r},\n"
        f"    defaults={{'rate_limit_per_minute': {workspace:d}}},\n"
        ")\n"
        f"AccessToken.objects.update(rate_limit_per_minute={token:d})\n",
    )


def key_table(proj: benchlib.Project) -> tuple[str | None, str]:
    """The IdempotencyKey model's table, or None and why not."""
    out = proj.manage(
        "shell",
        "-c",
        "try:\n"
        "    from bots.models import IdempotencyKey\n"
        "except ImportError:\n"
        "    print('TABLE -')\n"
        "else:\n"
        "    print('TABLE', IdempotencyKey._meta.db_table)\n",
    )
    table = out.strip().splitlines()[-1].split()[-1]
    if table == "-":
        return None, "bots.models has no IdempotencyKey"
    with proj.connect(autocommit=True) as conn:
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
    if not row or not row[0]:
        return None, f"table {table} is missing (migration not there or not applied)"
    return table, ""


def stored(proj: benchlib.Project, table: str | None) -> dict[str, int]:
    """chat_messages.stored's counts, plus the idempotency keys (all, and
    those still claimed without an answer)."""
    counts = chat_messages.stored(proj)
    counts["keys"] = counts["keys_open"] = 0
    if table is not None:
        with proj.connect(autocommit=True) as conn:
            row = conn.execute(
                sql.SQL(
                    "SELECT count(*), count(*) FILTER (WHERE status_code IS NULL) FROM {}"
                ).format(sql.Identifier(table))
            ).fetchone()
        assert row is not None
        counts["keys"], counts["keys_open"] = int(row[0]), int(row[1])
    return counts


@contextlib.contextmanager
def redis_keys() -> Iterator[redis.Redis]:
    """A client of the run's Redis database; the limiter's counters, the
    direct check's and the run's Celery queue deleted before and after."""
    client = redis.Redis.from_url(REDIS_URL)
    queue = os.environ["CELERY_QUEUE"]

    def forget() -> None:
        for pattern in (f"{LIMITER_PREFIX}*", f"{DIRECT_PREFIX}*", f"*{queue}*"):
            keys = list(client.scan_iter(match=pattern, count=1000))
            if keys:
                client.delete(*keys)

    forget()
    try:
        yield client
    finally:
        with contextlib.suppress(redis.RedisError):
            forget()
        client.close()


def script_calls(client: redis.Redis) -> int:
    """Lua scripts Redis has run so far (any client of the server): the
    limiter's one round trip is an EVALSHA. (Its counters expire within
    milliseconds under a limit as high as HIGH_LIMIT, so they are not counted.)"""
    stats = client.info("commandstats")
    return sum(
        int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("evalsha", "eval")
    )


# ---------------------------------------------------------------- 1. cost per request


@dataclass
class Skip:
    reason: str = ""


def probe(
    config: Config,
    server: benchlib.AsgiServer,
    proj: benchlib.Project,
    table: str | None,
    skip: Skip,
    failures: list[str],
) -> None:
    """One request that shows the server runs the configuration asked for."""
    demo, body = proj.demo, event_body()
    if not config.keyed:
        status, headers, _ = post_event(server.base_url, demo, body)
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
    before = stored(proj, table)
    key = f"probe-{os.getpid()}-{time.monotonic_ns()}"
    first = post_event(server.base_url, demo, body, key)
    second = post_event(server.base_url, demo, body, key)
    after = stored(proj, table)
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
    *,
    proj: benchlib.Project,
    wrk: str,
    tmp: Path,
    args: argparse.Namespace,
    table: str | None,
    client: redis.Redis,
    skip: Skip,
    failures: list[str],
) -> web_tier.Measured | None:
    demo = proj.demo
    conns = args.connections

    def script(stage: str) -> Path:
        prefix = f"{os.getpid()}-{config.name}{round_}-{stage}-" if config.keyed else None
        return load_script(
            tmp / f"{config.name}{round_}-{stage}.lua",
            token=demo["tokens"]["developer"],
            bot_id=demo["botId"],
            body=event_body(),
            key_prefix=prefix,
        )

    with web_tier.start(config.server, proj) as server:
        assert isinstance(server, benchlib.AsgiServer)
        probe(config, server, proj, table, skip, failures)
        if config.keyed and skip.reason:
            return None
        url = f"{server.base_url}/v1/chat/events"
        log(f"{config.name} ({config.label}) round {round_}: warm-up {args.warmup:g} s")
        create_event.run_wrk(
            wrk, url, script("warm"), connections=conns, threads=1, seconds=args.warmup
        )
        benchlib.wait_for_quiet(args.quiet_wait)
        time.sleep(1)
        groups = {"serve": server.pids(), "redis": chat_stream.pids_named("redis-server")}
        before, calls = stored(proj, table), script_calls(client)
        cpu_before = benchlib.cpu_snapshot(groups)
        log(f"{config.name} ({config.label}) round {round_}: wrk -c{conns} {args.duration:g} s")
        result = create_event.run_wrk(
            wrk, url, script("load"), connections=conns, threads=1, seconds=args.duration
        )
        cpu = benchlib.cpu_use(cpu_before, benchlib.cpu_snapshot(groups))
        time.sleep(1)  # requests in flight when wrk stopped
        after, calls = stored(proj, table), script_calls(client) - calls
    measured = web_tier.Measured(
        "serve", f"{config.name} round {round_}", result, cpu, after["events"] - before["events"]
    )
    web_tier.check(measured, conns, before, after, failures)
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


def per_request_ms(m: web_tier.Measured, group: str) -> float:
    return m.cpu.cores.get(group, 0.0) * m.cpu.wall / max(1, m.wrk["requests"]) * 1000


def print_cost_phase(config: Config, m: web_tier.Measured, calls: int, keys: int | None) -> None:
    w = m.wrk
    stored_keys = "" if keys is None else f", idempotency keys stored {keys}"
    print(
        f"{m.request}, {config.label}: "
        f"{w['requests']} requests in {w['duration_us'] / 1e6:.1f} s = {m.rate:.0f} req/s, "
        f"p50 {w['p50_us'] / 1000:.2f} ms, p99 {w['p99_us'] / 1000:.2f} ms; {w['created']} x 201, "
        f"{w['headed']} with RateLimit; Redis scripts run {calls} (by any client); "
        f"events stored {m.created}{stored_keys}"
    )
    print("   " + m.cpu.report(m.request, w["requests"]).replace("\n", "\n   "))


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


def http_accuracy(
    *,
    proj: benchlib.Project,
    wrk: str,
    tmp: Path,
    args: argparse.Namespace,
    client: redis.Redis,
    failures: list[str],
) -> Accuracy:
    demo = proj.demo
    set_limits(proj, workspace=args.policy, token=HIGH_LIMIT)
    # Another workspace warms both processes; its counters are its own.
    warm = load_script(
        tmp / "accuracy-warm.lua",
        token=demo["outsiderToken"],
        bot_id=demo["otherBotId"],
        body=event_body(),
    )
    load = load_script(
        tmp / "accuracy.lua",
        token=demo["tokens"]["developer"],
        bot_id=demo["botId"],
        body=event_body(ACCURACY_TYPE),
    )
    conns = args.accuracy_connections
    with benchlib.procfile_web(proj, workers=2, env={"WEB_CONCURRENCY": "2"}) as server:
        url = f"{server.base_url}/v1/chat/events"
        log(f"accuracy: warm-up by another workspace, {args.warmup:g} s")
        create_event.run_wrk(wrk, url, warm, connections=2 * conns, threads=1, seconds=args.warmup)
        benchlib.wait_for_quiet(args.quiet_wait)
        for key in client.scan_iter(match=f"{LIMITER_PREFIX}workspace:*", count=1000):
            client.delete(key)  # a quiet counter
        workers = server.worker_pids()
        groups = {f"web {pid}": [pid] for pid in workers}
        groups["redis"] = chat_stream.pids_named("redis-server")
        spread: list[int] = []
        cpu_before = benchlib.cpu_snapshot(groups)
        log(
            f"accuracy: 2 web processes, 2 wrk x {conns} connections, "
            f"{args.accuracy_duration:g} s, policy {args.policy}/min"
        )
        with ThreadPoolExecutor(2) as pool:
            runs = [
                pool.submit(
                    create_event.run_wrk,
                    wrk,
                    url,
                    load,
                    connections=conns,
                    threads=1,
                    seconds=args.accuracy_duration,
                    midway=(lambda: spread.extend(server.connections_by_worker()))
                    if index == 0
                    else None,
                )
                for index in range(2)
            ]
            results = [run.result() for run in runs]
        cpu = benchlib.cpu_use(cpu_before, benchlib.cpu_snapshot(groups))
        time.sleep(1)  # requests in flight when wrk stopped
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
    for index, r in enumerate(results, 1):
        print(
            f"  wrk {index}: {r['requests']} answers in {r['duration_us'] / 1e6:.1f} s: "
            f"{r['created']} x 201, {r['limited']} x 429, {r['other'] - r['limited']} other; "
            f"socket errors connect/read/write/timeout {r['err_connect']}/{r['err_read']}/"
            f"{r['err_write']}/{r['err_timeout']}"
        )
        if r["other"] != r["limited"] or r["created"] + r["limited"] != r["requests"]:
            failures.append(f"accuracy wrk {index}: answers other than 201 and 429: {r}")
        if r["err_connect"] or r["err_read"] or r["err_write"] or r["err_timeout"]:
            failures.append(f"accuracy wrk {index}: socket errors: {r}")
    print(f"  client connections held by each web process midway: {spread}")
    print("   " + cpu.report("the accuracy phase", created + refused).replace("\n", "\n   "))
    if not 0 <= allowed - created <= 2 * conns:
        failures.append(f"accuracy: {allowed} events stored but {created} answered 201")
    if len(spread) != 2 or min(spread) == 0:
        failures.append(f"accuracy: the load did not reach both web processes: {spread}")
    return Accuracy(
        "HTTP, 2 web processes, 2 wrk",
        args.policy,
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
    sys.path.insert(0, str(benchlib.ROOT))
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


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def report(
    measured: dict[str, list[web_tier.Measured]],
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
    noisy = [
        f"{m.request} {m.cpu.other:.2f}"
        for ms in measured.values()
        for m in ms
        if m.cpu.other > BACKGROUND_LIMIT
    ]
    if noisy:
        print(f"  WARNING: background load (cores) during {', '.join(noisy)}: figures understated")
    if measured:
        print(f"  ({conns} keep-alive connections; rounds interleaved A B C)")
    for accuracy in accuracies:
        print(f"  {accuracy.line()}; {accuracy.detail}")


# ---------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0].replace("\n", " "),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--duration", type=float, default=10, help="seconds of each cost phase")
    parser.add_argument("--warmup", type=float, default=3, help="seconds before each phase")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of A B C")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections, cost")
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
        "--quiet-wait", type=float, default=60, help="seconds to wait for a quiet machine"
    )
    parser.add_argument(
        "--phases",
        default="cost,accuracy,limiter",
        help="any of cost (1), accuracy (2, over HTTP), limiter (2, the limiter alone)",
    )
    args = parser.parse_args()
    phases = set(args.phases.split(","))
    if not 1 <= args.policy <= HIGH_LIMIT // 10:
        parser.error(f"--policy must be between 1 and {HIGH_LIMIT // 10}")

    benchlib.exit_cleanly_on_sigterm()
    wrk = benchlib.ensure_wrk()
    print("== protection: rate limits and Idempotency-Key, cost per request and accuracy")
    benchlib.print_machine()
    print(f"redis: {REDIS_URL}; server: platform_site/Procfile web (python -m platform_site.serve)")
    failures: list[str] = []
    measured: dict[str, list[web_tier.Measured]] = {}
    accuracies: list[Accuracy] = []
    skip = Skip()
    # seed_demo enqueues the demo file's indexing: to a queue of the run's own.
    os.environ["CELERY_QUEUE"] = f"bench-protection-{os.getpid()}"

    if phases & {"cost", "accuracy"}:
        with (
            tempfile.TemporaryDirectory(prefix="bench-protection-") as tmp,
            redis_keys() as client,
            benchlib.project(DB, redis_url=REDIS_URL) as proj,
        ):
            # The bus, so the limiter too (RATE_LIMIT_REDIS_URL's default).
            proj.env["LIVE_STREAM_REDIS_URL"] = REDIS_URL
            if "cost" in phases:
                table, skip.reason = key_table(proj)
                set_limits(proj, workspace=HIGH_LIMIT, token=HIGH_LIMIT)
                for round_ in range(1, args.rounds + 1):
                    for config in CONFIGS:
                        if config.keyed and skip.reason:
                            log(f"C skipped: {skip.reason}")
                            continue
                        m = cost_phase(
                            config,
                            round_,
                            proj=proj,
                            wrk=wrk,
                            tmp=Path(tmp),
                            args=args,
                            table=table,
                            client=client,
                            skip=skip,
                            failures=failures,
                        )
                        if m is not None:
                            measured.setdefault(config.name, []).append(m)
            if "accuracy" in phases:
                accuracy = http_accuracy(
                    proj=proj, wrk=wrk, tmp=Path(tmp), args=args, client=client, failures=failures
                )
                accuracy.check(failures)
                accuracies.append(accuracy)
    if "limiter" in phases:
        with redis_keys() as client:
            accuracy = direct_accuracy(args, client, failures)
        accuracy.check(failures)
        accuracies.append(accuracy)

    report(measured, accuracies, skip, args.connections)
    print("\n".join(f"FAILED: {failure}" for failure in failures) or "  checks: all passed")
    return int(bool(failures))


if __name__ == "__main__":
    os.chdir(benchlib.ROOT)
    sys.exit(main())
