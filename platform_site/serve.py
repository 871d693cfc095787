"""The web server, as `make run` (platform_site/Procfile) and the production
recipe start it: uvicorn serving platform_site.asgi, one process per core.

    python -m platform_site.serve [--host 127.0.0.1] [--port 8000] [--workers N]

One process per core by default when the live stream has Redis to reach the
listeners of every process; one process on the embedded defaults, whose
in-process bus reaches its own listeners only. WEB_CONCURRENCY (or
--workers) chooses another number."""

import argparse
import logging
import multiprocessing
import multiprocessing.process
import os
import signal
import socket
import sys
import time
from typing import Any

import uvicorn
from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger("uvicorn.error")


os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def default_workers() -> int:
    from django.conf import settings

    if "WEB_CONCURRENCY" in os.environ:
        return int(os.environ["WEB_CONCURRENCY"])
    return cores() if settings.LIVE_STREAM_REDIS_URL else 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument("--workers", type=int, default=None, help="processes (default above)")
    parser.add_argument(
        "--access-log",
        action=argparse.BooleanOptionalAction,
        default=os.environ.get("WEB_ACCESS_LOG", "1") != "0",
        help="one log line per request (WEB_ACCESS_LOG=0 turns it off)",
    )
    parser.add_argument(
        "--forwarded-allow-ips",
        default=os.environ.get("FORWARDED_ALLOW_IPS", ""),
        help="proxies (comma-separated addresses) whose X-Forwarded-For and "
        "X-Forwarded-Proto are taken for the client's; none by default",
    )
    args = parser.parse_args(argv)
    try:
        workers = args.workers if args.workers is not None else default_workers()
        from django.conf import settings

        if workers > 1 and not settings.LIVE_STREAM_REDIS_URL:
            parser.error(
                "more than one web process needs Redis for the live stream: set "
                "LIVE_STREAM_REDIS_URL (or a redis:// CELERY_BROKER_URL), or --workers 1"
            )
    except ImproperlyConfigured as exc:
        parser.error(str(exc))
    if workers < 1:
        parser.error("--workers must be at least 1")
    # Each process checks it against the live stream's bus (settings).
    os.environ["WEB_CONCURRENCY"] = str(workers)
    # The access log is ours (platform_site/observability/request_observation.py): its line
    # carries the request id, and is JSON when the other lines are.
    os.environ["WEB_ACCESS_LOG"] = "1" if args.access_log else "0"
    # And /metrics knows whether a forwarded request's client was taken.
    os.environ["FORWARDED_ALLOW_IPS"] = args.forwarded_allow_ips
    _configure_logging()
    options: dict[str, Any] = {
        "app": "platform_site.asgi:application",
        "host": args.host,
        "port": args.port,
        # Malformed requests answered with the one error body.
        "http": "platform_site.server.http_protocol:HttpToolsProtocol",
        "lifespan": "off",
        # Forwarded headers are anybody's to forge: read only from the
        # proxies named (docs/api/admin.md, audit records).
        "proxy_headers": bool(args.forwarded_allow_ips),
        "forwarded_allow_ips": args.forwarded_allow_ips or None,
        "timeout_graceful_shutdown": 5,
        "access_log": False,
        # uvicorn's lines go through the same formatter as the others (LOGGING).
        "log_config": None,
    }
    if workers == 1:
        uvicorn.run(**options)
    elif not supervise(options, workers):
        sys.exit(1)


def supervise(options: dict[str, Any], workers: int) -> bool:
    """`workers` uvicorn processes, each listening on a socket of its own
    bound with SO_REUSEPORT, so that the kernel spreads new connections
    evenly over them. (uvicorn's own --workers share one socket, and the
    kernel then hands most connections to whichever process waits first:
    16 keep-alive clients were seen split 2 and 14, and a thousand live
    stream listeners all on one process.) A process that dies is started
    again, unless it died before it served (its port taken, its settings
    wrong: it would again): then all stop, and the answer is False. SIGINT or SIGTERM stops them
    all, each after its grace period."""
    context = multiprocessing.get_context("spawn")
    stopping = False

    def start() -> tuple[multiprocessing.process.BaseProcess, Any]:
        ready = context.Event()
        process = context.Process(target=_serve_one, args=(options, ready), daemon=False)
        process.start()
        return process, ready

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    processes = [start() for _ in range(workers)]
    healthy = True
    while not stopping:
        time.sleep(0.5)
        for index, (process, ready) in enumerate(processes):
            if process.is_alive() or stopping:
                continue
            if not ready.is_set():
                logger.error(
                    "Web process %s exited (%s) before it served: stopping",
                    process.pid,
                    process.exitcode,
                )
                stopping, healthy = True, False
                break
            logger.warning(
                "Web process %s exited (%s): starting another", process.pid, process.exitcode
            )
            processes[index] = start()
    for process, _ in processes:
        if process.is_alive() and process.pid is not None:
            os.kill(process.pid, signal.SIGTERM)
    for process, _ in processes:
        process.join()
    return healthy


def _configure_logging() -> None:
    """Django's LOGGING, before the application (which applies it again) is
    loaded: what uvicorn says first is formatted like the rest."""
    from django.conf import settings

    from platform_site.observability.log_config import configure

    configure(settings.LOGGING)


class _Server(uvicorn.Server):
    """uvicorn's server, which tells its supervisor once it serves."""

    def __init__(self, config: uvicorn.Config, ready: Any) -> None:
        super().__init__(config)
        self.ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self.ready.set()


def _serve_one(options: dict[str, Any], ready: Any) -> None:
    """One web process (spawned): its own listening socket, shared by port;
    `ready` is set once it serves."""
    _configure_logging()
    family, kind, proto, _, address = socket.getaddrinfo(
        options["host"], options["port"], type=socket.SOCK_STREAM
    )[0]
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    listener.bind(address)
    listener.listen(2048)
    listener.set_inheritable(True)
    _Server(uvicorn.Config(**options), ready).run(sockets=[listener])


if __name__ == "__main__":
    main()
