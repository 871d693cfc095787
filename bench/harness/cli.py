"""Command-line options several benchmarks share."""

from __future__ import annotations

import argparse


def parser(doc: str) -> argparse.ArgumentParser:
    """A parser described by the first paragraph of `doc`, showing defaults."""
    return argparse.ArgumentParser(
        description=doc.split("\n\n")[0].replace("\n", " "),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )


def add_rounds(
    parser: argparse.ArgumentParser, *, rounds: int, configs: str, what: str = "phase"
) -> None:
    """Interleaved rounds of wrk phases against servers started afresh: their
    length, warm-up, count, connections, and the wait for a quiet machine."""
    parser.add_argument("--duration", type=float, default=10, help=f"seconds of each {what}")
    parser.add_argument("--warmup", type=float, default=3, help="seconds before each phase")
    parser.add_argument("--rounds", type=int, default=rounds, help=f"rounds of {configs}")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections")
    parser.add_argument(
        "--quiet-wait", type=float, default=60, help="seconds to wait for a quiet machine"
    )


def add_db(parser: argparse.ArgumentParser, default: str) -> None:
    """The run's own database (bench_*), created and dropped by the run."""
    parser.add_argument("--db", default=default)


def add_quiet_wait(parser: argparse.ArgumentParser, default: float = 300.0) -> None:
    parser.add_argument(
        "--quiet-wait", type=float, default=default, help="seconds to wait for an idle machine"
    )


def add_gunicorn(
    parser: argparse.ArgumentParser, *, workers: int = 2, threads: int = 2, help: bool = False
) -> None:
    """gunicorn's gthread workers and their threads."""
    parser.add_argument(
        "--workers", type=int, default=workers, help="gunicorn workers" if help else None
    )
    parser.add_argument(
        "--threads", type=int, default=threads, help="threads per gthread worker" if help else None
    )
