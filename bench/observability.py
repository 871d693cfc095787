"""What seeing the platform run costs a request: Prometheus metrics (one
counter and one histogram per request, in memory-mapped files) and the access
log line with its request id, on PostgreSQL + Redis.

    .venv/bin/python bench/observability.py [--duration 10] [--rounds 3]

A fresh database bench_observability (migrated, seeded), Redis database 14
(BENCH_OBSERVABILITY_REDIS_URL) as broker, live-stream bus and rate limiter.
Every server is platform_site/Procfile's `web:` line exactly as `make run`
starts it (python -m platform_site.serve: one process per core), with the
rate limits out of reach as in every benchmark's project (nothing is
refused).

Create event (POST /v1/chat/events, --connections keep-alive connections,
wrk) served in four configurations, interleaved A B C D (--rounds times),
each on a fresh server: a --warmup, then --duration seconds.
- A `METRICS_ENABLED=0`: no metrics, text access log (the baseline);
- B as `make run`: metrics on, text access log;
- C metrics on, LOG_FORMAT=json;
- D `METRICS_ENABLED=0 WEB_ACCESS_LOG=0`: neither (what the log line costs).
Per configuration: requests/s (mean of its rounds) and the web processes'
CPU per request; B/A is the cost of metrics (target: B keeps at least 97%
of A's throughput). Then GET /metrics is timed (100 scrapes) on a B server
after load, with its answer checked for the counts of the run. Last, since
the cost sought is below the noise of a throughput run on 2 cores, what a
request's metrics and access line cost in isolation: the recording calls
of a create event, and the line's formatting (text and JSON), timed in a
process of the project (manage.py shell), against the CPU per request
measured above.

Checks (exit 1 when one fails): every answer 201, no socket error, stored
events = 201s (+ at most one in flight per connection), every answer with an
X-Request-Id (B and C's probe), and the scrape's created count equal to the
events stored by B and C servers since the metrics folder was emptied.
Nothing asserts on time.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import api, cli, load, machine, servers  # noqa: E402
from harness.project import ROOT, Project, bus_project  # noqa: E402
from harness.report import (  # noqa: E402
    failed_lines,
    mean,
    percentile,
)

DB = "bench_observability"
# No other benchmark or test uses database 14.
REDIS_URL = os.environ.get("BENCH_OBSERVABILITY_REDIS_URL", "redis://127.0.0.1:6379/14")
TARGET_RATIO = 0.97
SCRAPES = 100
# What a create event records, and its access line formatted, timed alone.
ISOLATED = """
import logging, time
from platform_site.observability import metrics
from platform_site.observability.log_config import formatter
from structlog.contextvars import bind_contextvars

n = 50000
started = time.perf_counter()
for _ in range(n):
    metrics.http_request_observe(
        route="/v1/chat/events", method="POST", status=201, seconds=0.0012
    )
    metrics.event_created()
print("metrics", (time.perf_counter() - started) / n * 1e6)
bind_contextvars(request_id="0123456789abcdef0123456789abcdef")
record = logging.LogRecord(
    "platform_site.access", logging.INFO, __file__, 1, "%s %s %s",
    ("POST", "/v1/chat/events", 201), None,
)
extras = {"method": "POST", "path": "/v1/chat/events", "status": 201,
          "duration_ms": 1.2, "client": "127.0.0.1"}
record.__dict__.update(extras)
for name, json in (("text", False), ("json", True)):
    line = formatter(json=json)
    started = time.perf_counter()
    for _ in range(n // 5):
        line.format(record)
    print(name, (time.perf_counter() - started) / (n // 5) * 1e6)
"""


@dataclass(frozen=True)
class Config:
    name: str
    label: str
    server: str  # as web_tier.start names it
    metrics: bool


CONFIGS = (
    Config("A", "metrics off", "serve:METRICS_ENABLED=0", metrics=False),
    Config("B", "metrics on (make run)", "serve", metrics=True),
    Config("C", "metrics on, JSON logs", "serve:LOG_FORMAT=json", metrics=True),
    Config("D", "metrics off, no access log", "serve:METRICS_ENABLED=0+WEB_ACCESS_LOG=0", False),
)


def probe(config: Config, server: servers.WebServer, demo: dict, failures: list[str]) -> None:
    status, headers, _ = api.post_event(server.base_url, demo, api.event_body(), None)
    request_id = headers.get("X-Request-Id")
    print(f"  probe {config.name}: {status}, X-Request-Id {request_id}")
    if status != 201 or not request_id:
        failures.append(f"{config.name} probe: {status}, X-Request-Id {request_id!r}")


class Bench(api.WrkRun):
    def phase(self, config: Config, round_: int) -> api.Measured:
        """The configuration's server, probed, warmed up, then measured."""
        proj = self.proj

        def script(stage: str) -> Path:
            path = self.tmp / f"{config.name}{round_}-{stage}.lua"
            return api.limited_event_script(path, proj.demo)

        with servers.web_server(config.server, proj) as server:
            probe(config, server, proj.demo, self.failures)
            measured, run = self.event_phase(
                server,
                script,
                label=f"{config.name} ({config.label}) round {round_}",
                request=f"{config.name} round {round_}",
            )
        w = run.result
        print(
            f"{config.name} round {round_}, {config.label}: {w['requests']} requests in "
            f"{w['duration_us'] / 1e6:.1f} s = {measured.rate:.0f} req/s, p50 "
            f"{w['p50_us'] / 1000:.2f} ms, p99 {w['p99_us'] / 1000:.2f} ms; web CPU "
            f"{measured.server_ms_per_request:.3f} ms/request"
        )
        return measured


def scrape_phase(proj: Project, expected_created: int, failures: list[str]) -> None:
    with servers.web_server("serve", proj) as server:
        times = []
        text = ""
        for _ in range(SCRAPES):
            started = time.perf_counter()
            with urllib.request.urlopen(f"{server.base_url}/metrics", timeout=10) as answer:
                text = answer.read().decode()
            times.append(time.perf_counter() - started)
    created = sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith('platform_events_total{outcome="created"}')
    )
    files = len(os.listdir(proj.data_dir / "metrics"))
    print(
        f"GET /metrics x{SCRAPES}: p50 {percentile(times, 50) * 1000:.1f} ms, p99 "
        f"{percentile(times, 99) * 1000:.1f} ms; {len(text):,} bytes, {files} "
        f"metric files of the run's processes; events created counted {created:.0f}, "
        f"stored by metered servers {expected_created}"
    )
    if round(created) != expected_created:
        failures.append(
            f"/metrics counts {created:.0f} events created, the metered servers stored "
            f"{expected_created}"
        )


def isolated_phase(proj: Project) -> dict[str, float]:
    """Microseconds per request of the metrics and of the access line's formatting."""
    machine.wait_for_quiet(60)
    out = proj.manage("shell", "-c", ISOLATED)
    costs = {
        name: float(value)
        for name, value in (line.split() for line in out.strip().splitlines()[-3:])
    }
    print(
        f"in isolation, per request: metrics {costs['metrics']:.1f} µs; access line "
        f"formatted as text {costs['text']:.1f} µs, as JSON {costs['json']:.1f} µs"
    )
    return costs


def report(measured: dict[str, list[api.Measured]], costs: dict[str, float]) -> None:
    rate = {name: mean([m.rate for m in runs]) for name, runs in measured.items()}
    cpu = {name: mean([m.server_ms_per_request for m in runs]) for name, runs in measured.items()}
    print()
    print("== summary (create event, mean of the rounds)")
    for config in CONFIGS:
        if config.name in rate:
            print(
                f"  {config.name} {config.label:28} {rate[config.name]:7.0f} req/s  "
                f"web CPU {cpu[config.name]:.3f} ms/request  "
                f"throughput / A {rate[config.name] / rate['A']:.3f}"
            )
    ratio = rate["B"] / rate["A"]
    paired = sorted(b.rate / a.rate for a, b in zip(measured["A"], measured["B"], strict=True))
    print(
        f"  metrics cost: B/A throughput {ratio:.3f} (round by round: "
        f"{', '.join(f'{r:.3f}' for r in paired)}; target >= {TARGET_RATIO}: "
        f"{'met' if ratio >= TARGET_RATIO else 'missed'}), CPU per request B/A "
        f"{cpu['B'] / cpu['A']:.3f}"
    )
    share = costs["metrics"] / (cpu["A"] * 1000)
    print(
        f"  in isolation: metrics {costs['metrics']:.1f} µs of A's {cpu['A'] * 1000:.0f} µs "
        f"of web CPU per request = {share:.2%} (target <= {1 - TARGET_RATIO:.0%}: "
        f"{'met' if share <= 1 - TARGET_RATIO else 'missed'}); the access line's "
        f"formatting {costs['text']:.1f} µs as text, {costs['json']:.1f} µs as JSON"
    )


def main() -> int:
    parser = cli.parser(__doc__)
    cli.add_rounds(parser, rounds=3, configs="A B C D")
    args = parser.parse_args()
    wrk = load.start_wrk_bench("== observability: metrics and access log, cost per request")
    failures: list[str] = []
    measured: dict[str, list[api.Measured]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="bench-observability-") as tmp,
        bus_project(DB, queue="bench-observability", redis_url=REDIS_URL) as proj,
    ):
        # Counted from here: what seeding did is not the run's.
        shutil.rmtree(proj.data_dir / "metrics", ignore_errors=True)
        bench = Bench(args, proj, wrk, Path(tmp), failures)
        metered = 0
        for round_ in range(1, args.rounds + 1):
            for config in CONFIGS:
                stored_before = api.stored(proj)["events"]
                m = bench.phase(config, round_)
                measured.setdefault(config.name, []).append(m)
                if config.metrics:
                    metered += api.stored(proj)["events"] - stored_before
        scrape_phase(proj, metered, failures)
        costs = isolated_phase(proj)
    report(measured, costs)
    return failed_lines(failures, "  checks: all passed")


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
