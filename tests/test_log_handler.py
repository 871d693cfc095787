"""The console handler writes lines in batches (platform_site/observability/log_handler.py):
below WARNING they wait up to flush_seconds, a warning goes out at once after
what waited, nothing is lost at exit or written twice by a forked child."""

import io
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from platform_site.observability.log_handler import BatchedStreamHandler


class CountingStream(io.StringIO):
    """A stream that counts its writes (each a system call on a pipe)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.lock = threading.Lock()

    def write(self, text: str) -> int:
        with self.lock:
            self.writes += 1
            return super().write(text)


@pytest.fixture
def logged() -> Iterator[tuple[logging.Logger, CountingStream, BatchedStreamHandler]]:
    stream = CountingStream()
    handler = BatchedStreamHandler(stream, flush_seconds=0.2)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger = logging.getLogger(f"test_log_handler.{id(stream)}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    yield logger, stream, handler
    logger.removeHandler(handler)


def wait_for(check: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("not written in time")
        time.sleep(0.01)


def test_lines_below_warning_wait_and_go_out_together(logged: tuple) -> None:
    logger, stream, _ = logged
    for n in range(50):
        logger.info("line %d", n)
    # Held back for now: nothing written yet.
    assert stream.getvalue() == ""
    wait_for(lambda: stream.getvalue().count("\n") == 50)
    assert stream.getvalue().splitlines() == [f"INFO line {n}" for n in range(50)]
    assert stream.writes == 1


def test_a_warning_goes_out_at_once_after_what_waited(logged: tuple) -> None:
    logger, stream, _ = logged
    logger.info("first")
    logger.debug("second")
    logger.warning("careful")
    assert stream.getvalue().splitlines() == ["INFO first", "DEBUG second", "WARNING careful"]
    logger.error("broken")
    assert stream.getvalue().splitlines()[-1] == "ERROR broken"


def test_flush_writes_what_waits(logged: tuple) -> None:
    logger, stream, handler = logged
    logger.info("pending")
    handler.flush()
    assert stream.getvalue() == "INFO pending\n"
    handler.flush()
    assert stream.writes == 1


def test_flush_seconds_zero_writes_each_line_at_once() -> None:
    stream = CountingStream()
    handler = BatchedStreamHandler(stream, flush_seconds=0)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.handle(logging.makeLogRecord({"msg": "now", "levelno": logging.INFO}))
    assert stream.getvalue() == "now\n"


def test_lines_keep_coming_after_a_batch(logged: tuple) -> None:
    logger, stream, _ = logged
    logger.info("one")
    wait_for(lambda: "one" in stream.getvalue())
    logger.info("two")
    wait_for(lambda: "two" in stream.getvalue())
    assert stream.getvalue().splitlines() == ["INFO one", "INFO two"]


def test_a_line_that_cannot_be_formatted_is_reported_not_raised(logged: tuple) -> None:
    logger, stream, handler = logged
    raised = logging.raiseExceptions
    logging.raiseExceptions = False
    try:
        logger.info("%d", "not a number")
    finally:
        logging.raiseExceptions = raised
    handler.flush()
    assert stream.getvalue() == ""


PROGRAM = """
import logging, os, sys, time
from platform_site.observability.log_handler import BatchedStreamHandler
handler = BatchedStreamHandler(sys.stdout, flush_seconds=30)
handler.setFormatter(logging.Formatter("%(message)s"))
logger = logging.getLogger("p")
logger.addHandler(handler)
logger.setLevel(logging.INFO)
logger.info("before the fork")
child = os.fork()
if child == 0:
    logger.info("from the child")
    handler.flush()
    os._exit(0)
os.waitpid(child, 0)
logger.info("at exit")
"""


def test_nothing_is_lost_at_exit_nor_written_twice_by_a_child() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    ).stdout
    # The child's own line first (it flushed before the parent's exit); the
    # parent's waiting lines once, at its exit.
    assert out.splitlines() == ["from the child", "before the fork", "at exit"]
