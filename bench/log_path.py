"""What the log path costs the whole platform as `make run` starts it: the
access line and everything the processes print, relayed to one output.

    .venv/bin/python bench/log_path.py [--seconds 15] [--rounds 2] [--connections 16]

The Procfile's web, worker and beat, started by what `make run` starts
them with (platform_site/procfile_runner.py), on PostgreSQL and Redis,
their output to a file as a terminal would take it; the demo bot's webhook
answered in 0-300 ms (bench/webhook_receiver.py). wrk creates events
(POST /v1/chat/events, --connections keep-alive connections) for --seconds
after a warm-up. Configurations, interleaved (their order rotated each round), each on a
fresh platform:
- `access log off`: WEB_ACCESS_LOG=0 (the baseline);
- `access log on`: as `make run` runs it;
- `honcho, access log on`: the same under honcho (what `make run` ran
  before), when honcho is installed.

Figures: creates/s of each (mean of rounds), the ratio on / off (target:
at least 0.97, the log path costing at most 3 %), and CPU per request by
group (web, worker, beat, the runner, PostgreSQL, Redis). Checks (exit 1
when one fails): every answer 201, as many events stored, and the output
holding one access line per request when it is on.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import api, load, machine, servers  # noqa: E402
from harness.project import PYTHON, ROOT, Project, project  # noqa: E402
from harness.report import log, verdict  # noqa: E402

DB = "bench_log_path"
QUEUE = "bench-log-path"
WARMUP = 3.0


@contextlib.contextmanager
def platform(
    proj: Project, variant: str, port: int, out: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """The platform of `variant`, serving on `port`, its output to `out`;
    stopped afterwards (SIGTERM: the runner stops each process as on Ctrl-C)."""
    env = {
        **proj.env,
        "PORT": str(port),
        "CELERY_QUEUE": QUEUE,
        "WEB_ACCESS_LOG": "0" if "off" in variant else "1",
        "LOG_LEVEL": "INFO",
    }
    if variant.startswith("honcho"):
        command = [PYTHON, "-m", "honcho", "-f", "platform_site/Procfile", "-d", ".", "start"]
    else:
        command = [PYTHON, "-m", "platform_site.procfile_runner", "-f", "platform_site/Procfile"]
    command += ["web", "worker", "beat"]
    with servers.started(command, cwd=ROOT, env=env, log_path=out) as process:
        deadline = time.monotonic() + 90
        while not servers.ready(port):
            if time.monotonic() > deadline:
                raise SystemExit(f"{variant}: the platform did not start; see {out}")
            time.sleep(0.5)
        time.sleep(2.0)  # the worker's pool and beat up too
        yield process


def _settle(proj: Project) -> None:
    """Not timed: the tables the phases write vacuumed and analysed, and a
    CHECKPOINT, so that a phase pays for no earlier phase's dead rows and
    dirty buffers (PostgreSQL's CPU per create otherwise climbs from phase
    to phase, whatever the configuration)."""
    with proj.connect(autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) events_event, events_deliveryattempt")
        conn.execute("CHECKPOINT")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    wrk = load.start_wrk_bench("the log path of make run's platform: access log on against off")
    variants = ["access log off", "access log on"]
    if importlib.util.find_spec("honcho") is not None:
        variants.append("honcho, access log on")
    failures: list[str] = []
    rates: dict[str, list[float]] = {variant: [] for variant in variants}
    with project(DB) as proj:
        receiver_port = servers.free_port()
        api.demo_webhook_to(proj, f"http://127.0.0.1:{receiver_port}/uniform/0/300")
        script = api.event_script(proj.data_dir / "event.lua", proj.demo)
        with servers.receiver(receiver_port, proj.data_dir / "received.txt") as receiver:
            for round_ in range(args.rounds):
                # The order rotated each round: the database grows, and what
                # runs later in a round pays for it.
                shift = round_ % len(variants)
                for variant in variants[shift:] + variants[:shift]:
                    port = servers.free_port()
                    out = proj.data_dir / f"output-{variant.replace(' ', '-')}-{round_}.txt"
                    log(f"round {round_ + 1}: {variant}")
                    with platform(proj, variant, port, out) as process:
                        url = f"http://127.0.0.1:{port}/v1/chat/events"
                        load.run_wrk(wrk, url, script, connections=args.connections,
                                     threads=2, seconds=WARMUP)  # fmt: skip
                        _settle(proj)
                        machine.wait_for_quiet(max_wait=60)
                        roles = machine.platform_groups(process.pid)
                        groups = {
                            "platform": machine.tree(process.pid),
                            **roles,
                            "redis": machine.pids_named("redis-server"),
                            "receiver": [receiver.pid],
                        }
                        stored_before = api.count_events(proj)
                        lines_before = out.read_bytes().count(b"POST /v1/chat/events 201")
                        meter = machine.CpuMeter(groups)
                        summary = load.run_wrk(wrk, url, script, connections=args.connections,
                                               threads=2, seconds=args.seconds)  # fmt: skip
                        cpu = meter.stop()
                        time.sleep(1.0)
                        created = summary["created"]
                        requests = created + summary["other"]
                        stored = api.count_events(proj) - stored_before
                        lines = out.read_bytes().count(b"POST /v1/chat/events 201") - lines_before
                    rate = created / (summary["duration_us"] / 1e6)
                    rates[variant].append(rate)
                    print(
                        f"round {round_ + 1} {variant:22}: {rate:7.1f} creates/s,"
                        f" {cpu.per_request_ms('platform', created):.3f} ms platform CPU"
                        f" and {cpu.per_request_ms('postgres', created):.3f} ms PostgreSQL"
                        f" per create; access lines {lines}",
                        flush=True,
                    )
                    by_process = ", ".join(
                        f"{name} {cpu.per_request_ms(name, created):.3f}"
                        for name in (*roles, "redis")
                        if roles.get(name, True)
                    )
                    print(f"    CPU ms per create by process: {by_process}", flush=True)
                    if requests != created:
                        failures.append(f"{variant}: {requests - created} answers not 201")
                    if abs(stored - created) > args.connections:
                        failures.append(f"{variant}: {stored} stored for {created} created")
                    if "on" in variant.split(",")[-1] and abs(lines - created) > args.connections:
                        failures.append(f"{variant}: {lines} access lines for {created} creates")
    mean = {variant: sum(values) / len(values) for variant, values in rates.items()}
    print("\nmean creates/s:")
    for variant in variants:
        print(f"  {variant:22} {mean[variant]:7.1f}")
    ratio = mean["access log on"] / mean["access log off"]
    print(f"access log on / off: {ratio:.3f} (target >= 0.97)")
    if "honcho, access log on" in mean:
        honcho = mean["honcho, access log on"] / mean["access log off"]
        print(f"honcho, access log on / off: {honcho:.3f}")
    return verdict(failures, "CORRECTNESS CHECKS PASSED")


if __name__ == "__main__":
    sys.exit(main())
