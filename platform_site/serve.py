"""The web server, as `make run` (platform_site/Procfile) and the production
recipe start it: uvicorn serving platform_site.asgi, one process per core.

    python -m platform_site.serve [--host 127.0.0.1] [--port 8000] [--workers N]

One process per core by default when the live stream has Redis to reach the
listeners of every process; one process on the embedded defaults, whose
in-process bus reaches its own listeners only. WEB_CONCURRENCY (or
--workers) chooses another number."""

import argparse
import os

import uvicorn

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
        help="one line per request on stdout (WEB_ACCESS_LOG=0 turns it off)",
    )
    args = parser.parse_args(argv)
    workers = args.workers if args.workers is not None else default_workers()
    # Each process checks it against the live stream's bus (settings).
    os.environ["WEB_CONCURRENCY"] = str(workers)
    uvicorn.run(
        "platform_site.asgi:application",
        host=args.host,
        port=args.port,
        workers=workers,
        # Malformed requests answered with the one error body.
        http="platform_site.http_protocol:HttpToolsProtocol",
        lifespan="off",
        # Forwarded headers are not trusted (README): not read either.
        proxy_headers=False,
        timeout_graceful_shutdown=5,
        access_log=args.access_log,
    )


if __name__ == "__main__":
    main()
