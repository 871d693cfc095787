"""Waking a worker's delivery engine when an event falls due sooner than its
next look at the table: a tiny Celery task (events.tasks.wake_deliveries),
sent after the event's transaction commits.

The task is sent from a thread of this process, not from the request's: a
request does not wait on the broker, and wake-ups asked for within
COALESCE_SECONDS of each other go as one. Whatever process runs it claims
everything then due, so one wake-up serves every event committed before it.
If it is lost, the engines' periodic claims (EVENT_DISPATCH_INTERVAL) find
the events anyway."""

import logging
import os
import threading
import time

from kombu.exceptions import OperationalError

logger = logging.getLogger(__name__)

# At most one wake-up per this many seconds from one process; a wake-up asked
# for meanwhile is sent when the interval ends. A lone event's goes at once;
# under load, sending one every 5 ms cost a web process 7% of its CPU
# (bench/profile_server.py), and each claims every event then due anyway.
COALESCE_SECONDS = 0.02
# A wake-up older than this is dropped by the worker: claims have found its
# events by then.
EXPIRES_SECONDS = 10.0


class _Waker:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self._wanted = threading.Condition()
        self._pending = False
        self._thread = threading.Thread(target=self._run, name="delivery-wakeups", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        with self._wanted:
            self._pending = True
            self._wanted.notify()

    def _run(self) -> None:
        from events.tasks import wake_deliveries

        while True:
            with self._wanted:
                while not self._pending:
                    self._wanted.wait()
                self._pending = False
            try:
                wake_deliveries.apply_async(expires=EXPIRES_SECONDS, retry=False)
            except OperationalError:
                logger.warning(
                    "The broker refused a delivery wake-up; the events go at the next claim"
                )
            except Exception:
                logger.exception("Sending a delivery wake-up failed")
            time.sleep(COALESCE_SECONDS)


_waker: _Waker | None = None
_lock = threading.Lock()


def deliveries_wake() -> None:
    """Have a worker claim due events now (call it once the events are committed)."""
    global _waker
    waker = _waker
    if waker is None or waker.pid != os.getpid():
        with _lock:
            if _waker is None or _waker.pid != os.getpid():
                _waker = _Waker()
            waker = _waker
    waker.wake()
