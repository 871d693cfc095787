"""Waking a worker's delivery engine when an event falls due sooner than its
next look at the table, sent after the event's transaction commits.

With Redis (EVENT_WAKE_REDIS_URL, by default the live stream's), a wake-up
is an item pushed onto a short list that every engine waits on (BLPOP):
one engine takes it and claims. Otherwise it is a tiny Celery task
(events.tasks.wake_deliveries) that the worker process running it hands
to its engine: about a millisecond of a worker's CPU each, for what Redis
does in a round trip.

The wake-up is sent from a thread of this process, not from the request's:
a request does not wait on Redis or the broker, and wake-ups asked for
within COALESCE_SECONDS of each other go as one. Whatever engine takes it
claims everything then due, so one wake-up serves every event committed
before it. If it is lost, the engines' periodic claims
(EVENT_DISPATCH_INTERVAL) find the events anyway."""

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable

import redis
from django.conf import settings
from kombu.exceptions import OperationalError

from events.engine.backoff import failure_backoff
from platform_site.foundation.jobs import job_send

logger = logging.getLogger(__name__)

# At most one wake-up per this many seconds from one process; a wake-up asked
# for meanwhile is sent when the interval ends. A lone event's goes at once;
# under load, sending one every 5 ms cost a web process 7% of its CPU
# (bench/profile_server.py), and each claims every event then due anyway.
COALESCE_SECONDS = 0.02
# A wake-up older than this is dropped: claims have found its events by then.
EXPIRES_SECONDS = 10.0
# Named rather than imported: the engine sits below the tasks that run it.
WAKE_DELIVERIES_TASK = "events.tasks.wake_deliveries"
# Wake-ups the Redis list holds at most: one wakes an engine, which claims
# all that is due; a few more wake the others of a burst.
LIST_LENGTH = 4
# Seconds Redis has to connect and to answer a push.
REDIS_TIMEOUT = 1.0


def wake_key() -> str:
    """The Redis list of wake-ups: one per queue, so that deployments (or
    test runs) sharing a Redis keep apart, as their tasks do."""
    return f"{settings.CELERY_TASK_DEFAULT_QUEUE}:wake-deliveries"


def wake_send() -> None:
    """Send one wake-up (on the wake-up thread)."""
    if settings.EVENT_WAKE_REDIS_URL:
        _redis_push()
    else:
        job_send(WAKE_DELIVERIES_TASK, after_commit=False, expires=EXPIRES_SECONDS, retry=False)


_clients: dict[str, redis.Redis] = {}


def _redis_push() -> None:
    url = settings.EVENT_WAKE_REDIS_URL
    client = _clients.get(url)
    if client is None:
        client = _clients[url] = redis.Redis.from_url(
            url, socket_connect_timeout=REDIS_TIMEOUT, socket_timeout=REDIS_TIMEOUT
        )
    key = wake_key()
    pipe = client.pipeline(transaction=False)
    pipe.lpush(key, 1)
    pipe.ltrim(key, 0, LIST_LENGTH - 1)
    pipe.expire(key, int(EXPIRES_SECONDS))
    pipe.execute()


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
        while True:
            with self._wanted:
                while not self._pending:
                    self._wanted.wait()
                self._pending = False
            try:
                wake_send()
            except (OperationalError, redis.RedisError) as error:
                logger.warning(
                    "A delivery wake-up could not be sent (%s); the events go at the next claim",
                    error,
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


# Seconds a wait on the list lasts before it is asked again (under the
# client's read timeout): how long an engine may take to notice it stops,
# should redis-py swallow the cancellation (it does, cancelled as it
# connects).
LISTEN_SECONDS = 1


async def wake_ups_listen(on_wake: Callable[[], None], stopping: Callable[[], bool]) -> None:
    """An engine's side, on its loop until `stopping()` (or cancelled):
    `on_wake()` for each wake-up this engine takes from the Redis list. A
    Redis out of reach is logged once (and once more when it is back); the
    engine's periodic claims go on meanwhile."""
    from redis import asyncio as redis_asyncio

    client = redis_asyncio.Redis.from_url(
        settings.EVENT_WAKE_REDIS_URL,
        socket_connect_timeout=REDIS_TIMEOUT,
        socket_timeout=LISTEN_SECONDS + REDIS_TIMEOUT,
        client_name=f"delivery-wakeups-{os.getpid()}",
    )
    key = wake_key()
    failures = 0
    try:
        while not stopping():
            try:
                taken = await client.blpop([key], timeout=LISTEN_SECONDS)
            except redis.RedisError as error:
                if stopping():
                    return
                failures += 1
                if failures == 1:
                    logger.warning(
                        "Delivery wake-ups cannot be heard (%s); due events are claimed "
                        "every EVENT_DISPATCH_INTERVAL until Redis answers",
                        error,
                    )
                await asyncio.sleep(failure_backoff(failures))
                continue
            if failures:
                logger.warning("Delivery wake-ups are heard again")
                failures = 0
            if taken is not None:
                on_wake()
    finally:
        await client.aclose()
