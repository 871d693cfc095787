"""Where a served request spends its CPU, server included: the Procfile's web
process with one worker (WEB_CONCURRENCY=1) under wrk, sampled by py-spy
(the thread holding the GIL: where the CPU goes), on a fresh PostgreSQL database.

    .venv/bin/python bench/profile_server.py [--request event|message] [--seconds 15] [--top 40]

Prints the functions holding the most samples, on their own (own time) and with
what they call (total time), as shares of the samples. A diagnostic aid, not a
benchmark target.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import api, load, machine, servers, stacks  # noqa: E402
from harness.project import bus_project  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--request", choices=["event", "message"], default="event")
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    machine.exit_cleanly_on_sigterm()
    wrk = load.ensure_wrk()
    with (
        bus_project("bench_profile_server", queue="bench-chat") as proj,
        tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp,
    ):
        script = Path(tmp) / "requests.lua"
        with servers.procfile_web(proj, workers=1, env={"WEB_CONCURRENCY": "1"}) as server:
            if args.request == "event":
                api.event_script(script, proj.demo)
                url = f"{server.base_url}/v1/chat/events"
            else:
                rooms = api.make_rooms_sync(
                    server.base_url, proj.demo["webhookId"], rooms=32, per_room=1
                )
                api.message_script(script, rooms)
                url = f"{server.base_url}/chat/{proj.demo['webhookId']}/messages"
            load.run_wrk(wrk, url, script, connections=args.connections, threads=1, seconds=3)
            samples = Path(tmp) / "web"
            with stacks.recorded(server.pids()[:1], samples, args.seconds, rate=500, gil=True):
                result = load.run_wrk(
                    wrk, url, script, connections=args.connections, threads=1, seconds=args.seconds
                )
        print(
            f"{args.request}: {result['requests']} requests in "
            f"{result['duration_us'] / 1e6:.1f} s, {result['created']} x 201"
        )
        print(stacks.summary(samples, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
