"""The console handler: lines written a batch at a time.

Under load a web process logs a line per request, and writing each alone
(a system call, and a wake-up of whatever reads the pipe: `make run`'s
runner, a container's log driver) cost more than making it. Lines below
WARNING wait up to LOG_FLUSH_SECONDS in memory and go out together; a
warning or an error goes out at once, after what waited before it, so the
order is kept and a crash's last words are not held back. At exit
(logging.shutdown), at a prefork child's end (platform_site/celery.py) and
on flush() what waits is written."""

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import TextIO


class BatchedStreamHandler(logging.StreamHandler[TextIO]):
    def __init__(self, stream: TextIO | None = None, *, flush_seconds: float = 0.05) -> None:
        super().__init__(stream)
        self.flush_seconds = flush_seconds
        self._waiting: list[str] = []
        self._due = threading.Event()
        self._flusher: threading.Thread | None = None
        # A forked child has the parent's waiting lines, which the parent
        # writes, and no flusher thread: it starts afresh.
        os.register_at_fork(after_in_child=_forked_callback(weakref.ref(self)))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + self.terminator
        except Exception:
            self.handleError(record)
            return
        if self.flush_seconds <= 0 or record.levelno >= logging.WARNING:
            with self.lock:  # type: ignore[union-attr]
                self._waiting.append(line)
                self._write_waiting()
            return
        with self.lock:  # type: ignore[union-attr]
            first = not self._waiting
            self._waiting.append(line)
        if first:
            self._flusher_start()
            self._due.set()

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            self._write_waiting()

    def _write_waiting(self) -> None:
        # Called with the lock held.
        if not self._waiting:
            return
        text = "".join(self._waiting)
        self._waiting.clear()
        try:
            self.stream.write(text)
            self.stream.flush()
        except Exception:
            # What logging does with a line it cannot write: a note on
            # stderr (when raiseExceptions), never an error in the caller.
            self.handleError(logging.makeLogRecord({"msg": text}))

    def _flusher_start(self) -> None:
        if self._flusher is not None:
            return
        with self.lock:  # type: ignore[union-attr]
            if self._flusher is None:
                self._flusher = threading.Thread(
                    target=self._flush_loop, name="log-flusher", daemon=True
                )
                self._flusher.start()

    def _flush_loop(self) -> None:
        # One wake-up per batch while lines come, none while they do not.
        while True:
            self._due.wait()
            self._due.clear()
            time.sleep(self.flush_seconds)
            self.flush()

    def _forked(self) -> None:
        self._waiting = []
        self._due = threading.Event()
        self._flusher = None


def _forked_callback(handler: "weakref.ref[BatchedStreamHandler]") -> Callable[[], None]:
    def forked() -> None:
        alive = handler()
        if alive is not None:
            alive._forked()

    return forked
