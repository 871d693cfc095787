"""The delivery engine inside a Celery worker process: started when the
process starts (a prefork child, or a solo worker), on a thread of its own
with its own event loop (uvloop's where installed) and one database thread,
next to the tasks the process runs; stopped when the process stops.

Only Celery worker processes deliver: web processes and beat never start
one. EVENT_DELIVERY_CONCURRENCY=0 keeps a worker out of delivery (one that
only indexes files, say)."""

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from django.db import connections

from events.engine.loop import MAX_PARALLEL_CLAIMS, DeliveryEngine, EngineConfig

logger = logging.getLogger("events.engine")

# Seconds the requests in flight get to finish when the process stops; those
# still waiting then are given back and sent again by another process.
STOP_GRACE_SECONDS = 5.0
# Seconds before an engine that crashed (a bug) is started again.
RESTART_DELAY_SECONDS = 1.0
# Database threads of an engine (each with its connection): one for each
# claim that may be in flight, and one more, so that a claim never waits
# behind a batch being recorded.
DB_THREADS = MAX_PARALLEL_CLAIMS + 1


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    try:
        import uvloop
    except ImportError:  # not on this platform: asyncio's own loop
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def _close_connections(db: ThreadPoolExecutor) -> None:
    """Close the connection of each database thread, on that thread."""
    everyone = threading.Barrier(DB_THREADS)

    def close() -> None:
        everyone.wait(timeout=10)
        connections.close_all()

    for done in [db.submit(close) for _ in range(DB_THREADS)]:
        done.result()


class EngineThread(threading.Thread):
    def __init__(self, config: EngineConfig) -> None:
        super().__init__(name="deliveries", daemon=True)
        self.config = config
        self.ready = threading.Event()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._engine: DeliveryEngine | None = None
        self._stopping = False
        self._grace = STOP_GRACE_SECONDS

    def run(self) -> None:
        db = ThreadPoolExecutor(max_workers=DB_THREADS, thread_name_prefix="deliveries-db")
        try:
            while not self._stopping:
                with asyncio.Runner(loop_factory=_loop_factory()) as runner:
                    engine = DeliveryEngine(db=db, config=self.config)
                    with self._lock:
                        self._loop, self._engine = runner.get_loop(), engine
                        if self._stopping:  # asked before the engine could hear it
                            runner.get_loop().call_soon(engine.stop, self._grace)
                    try:
                        runner.run(engine.run(on_ready=self.ready.set))
                    except Exception:
                        logger.exception("The delivery engine failed; starting it again")
                    with self._lock:
                        self._loop = self._engine = None
                if not self._stopping:
                    self.ready.clear()
                    threading.Event().wait(RESTART_DELAY_SECONDS)
        finally:
            _close_connections(db)
            db.shutdown()
            self.ready.set()

    def wake(self) -> None:
        self._call(lambda engine: engine.wake())

    def stop(self, grace: float = STOP_GRACE_SECONDS) -> None:
        with self._lock:
            self._stopping, self._grace = True, grace
        self._call(lambda engine: engine.stop(grace))
        # The grace, then recording what came back.
        self.join(grace + 15.0)

    def _call(self, action: Callable[[DeliveryEngine], None]) -> None:
        with self._lock:
            loop, engine = self._loop, self._engine
            if loop is not None and engine is not None and not loop.is_closed():
                loop.call_soon_threadsafe(action, engine)


_thread: EngineThread | None = None


def start_engine() -> None:
    """Start delivering in this process (a Celery worker process), unless
    EVENT_DELIVERY_CONCURRENCY is 0 or it already delivers."""
    global _thread
    config = EngineConfig.from_settings()
    if config.concurrency <= 0 or (_thread is not None and _thread.is_alive()):
        return
    _thread = EngineThread(config)
    _thread.start()
    logger.info(
        "Delivering events: up to %d requests in flight, %d to one bot",
        config.concurrency,
        config.per_bot,
    )


def stop_engine() -> None:
    """Stop delivering in this process, if it does."""
    global _thread
    thread, _thread = _thread, None
    if thread is not None:
        thread.stop()


def wake_engine() -> None:
    """Make this process's engine claim now, if it has one."""
    if _thread is not None:
        _thread.wake()
