"""The delivery engine of one worker process: an asyncio loop that claims due
events up to the room it has, sends them with many requests in flight,
fairly across bots (lanes.py), and records the outcomes in batches.

- The claimer claims (claims.py) when events fall due: each claim
  says when the next unclaimed one does, and the claimer sleeps until then,
  or until woken (an event created due now, room freed after the process
  was full), or EVENT_DISPATCH_INTERVAL at most; while claims come back
  full it claims again at once, with up to MAX_PARALLEL_CLAIMS in flight.
  Claims are MIN_CLAIM_INTERVAL apart at least (unless the last one came
  back full), so that events falling due one by one are claimed in batches.
- It claims only while the process holds less than MAX_HELD_FACTOR × its
  concurrency, and leaves out the bots whose lanes hold enough: what it
  claims it can send before the lease ends (backpressure). A busy process
  stops claiming and the events wait in the table for one with room.
- Each request runs as a task of its own and hands its result over; once a
  second, queued deliveries that could no longer be answered inside their
  lease are given back to the table.
- The recorder writes the results that have piled up over
  RECORD_GATHER_SECONDS, in one transaction.

Database work runs on threads of its own (the `db` executor: one per claim
in flight and one for recording) and the loop never waits on it; every
database call is one short transaction."""

import asyncio
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

from django.conf import settings
from django.db import OperationalError, close_old_connections, connection

from events.engine.backoff import failure_backoff
from events.engine.claims import Claimed, deliveries_claim
from events.engine.delivery import Delivery, deliveries_record, deliveries_release
from events.engine.lanes import Lanes
from events.engine.stats import Period
from events.engine.wakeups import wake_ups_listen
from events.engine.webhook_client import Failure, WebhookClient, WebhookResult
from events.models import EventStatus
from platform_site.observability import metrics

logger = logging.getLogger("events.engine")

# Bots named in a report's lines about failed attempts, at most.
FAILING_BOTS_REPORTED = 20

T = TypeVar("T")

# A process holds at most this many times its concurrency: what is in flight,
# plus what is queued or waiting to be recorded.
MAX_HELD_FACTOR = 4
# A claim waits for at least this share of the held limit to be free, so
# that a full process claims in batches rather than one event at a time.
MIN_CLAIM_SHARE = 0.1
# Seconds between two claims of a process, at least, unless the last came
# back full: at 1,000 events a second, claims 10 ms apart took 10 events each
# and spent twice the database's CPU per event that claims 50 ms apart did.
# And how many claims it may have in flight at once while events fall due.
MIN_CLAIM_INTERVAL = 0.05
MAX_PARALLEL_CLAIMS = 2
# Seconds between two looks of a process's claims at the other apps' due
# rows (the clock's other work: scheduled bot messages, states' expiry),
# unless one of them falls due sooner. A quiet engine claims every
# EVENT_DISPATCH_INTERVAL and looks each time; a busy one claims every
# MIN_CLAIM_INTERVAL, and looking each time (two transactions and two
# lookups) was most of the worker's CPU per event at 200 events a second.
# A row made meanwhile is found within this time, as by a quiet engine.
CLOCK_WORK_INTERVAL = 0.25
# Results written per transaction, at most; and how long the recorder lets
# results pile up before it writes them (a transaction costs about as much
# as twenty results do).
RECORD_BATCH = 500
RECORD_GATHER_SECONDS = 0.05
# Seconds between two passes over queued deliveries for those that can no
# longer start in time.
EXPIRY_SWEEP_SECONDS = 1.0
# Counted for claims given back (released) unsent.
RELEASED = "released"


@dataclass(frozen=True)
class EngineConfig:
    concurrency: int  # requests in flight per process
    per_bot: int  # requests in flight to one bot
    batch: int  # events per claim, at most
    interval: float  # seconds between claims at most, when nothing falls due sooner
    report_interval: float  # seconds between two log lines of how it keeps up

    @classmethod
    def from_settings(cls) -> "EngineConfig":
        return cls(
            concurrency=settings.EVENT_DELIVERY_CONCURRENCY,
            per_bot=min(settings.EVENT_DELIVERY_PER_BOT, settings.EVENT_DELIVERY_CONCURRENCY),
            batch=settings.EVENT_DISPATCH_BATCH,
            interval=settings.EVENT_DISPATCH_INTERVAL,
            report_interval=settings.EVENT_DELIVERY_REPORT_INTERVAL,
        )

    @property
    def max_held(self) -> int:
        return MAX_HELD_FACTOR * self.concurrency


class DeliveryEngine:
    def __init__(self, *, db: Executor, config: EngineConfig) -> None:
        self.config = config
        self._executor = db
        self.lanes = Lanes(
            concurrency=config.concurrency, per_bot=config.per_bot, max_held=config.max_held
        )
        self._held: dict[str, Delivery] = {}
        self._finished: list[tuple[Delivery, WebhookResult]] = []
        self._released: list[Delivery] = []
        self._sending: set[asyncio.Task[None]] = set()
        self._excluded: list[str] = []
        self._stopping = False
        self._grace = 0.0
        self._waiting_for_room = False
        self.period = Period(started=time.monotonic())
        self._connections_reported = 0
        # When the next claim looks at the clock's other work, and when its
        # next row falls due as the last look found (seconds since the epoch).
        self._clock_work_look_at = 0.0
        self._clock_work_due: float | None = None
        self._wake_ups: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ from outside

    async def run(self, *, on_ready: Callable[[], None] | None = None) -> None:
        """Deliver until `stop()`; then give back what was not sent."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._record_needed = asyncio.Event()
        self._stop = asyncio.Event()
        self.client = WebhookClient()
        claimer = asyncio.create_task(self._claimer(), name="claimer")
        recorder = asyncio.create_task(self._recorder(), name="recorder")
        sweeper = asyncio.create_task(self._sweeper(), name="sweeper")
        reporter = asyncio.create_task(self._reporter(), name="reporter")
        if settings.EVENT_WAKE_REDIS_URL:
            self._wake_ups = asyncio.create_task(
                wake_ups_listen(self.wake, lambda: self._stopping), name="wake-ups"
            )
        if on_ready is not None:
            on_ready()
        stopped = asyncio.create_task(self._stop.wait())
        try:
            done, _ = await asyncio.wait(
                {stopped, claimer, recorder, sweeper}, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stopped.cancel()
            await self._shut_down(claimer, recorder, sweeper, reporter)
        for task in done - {stopped}:
            task.result()  # a coroutine that ended by itself failed: raise why

    def wake(self) -> None:
        """Claim now (an event fell due). Call it on the engine's loop."""
        self._wake.set()

    def stop(self, grace: float) -> None:
        """Stop claiming, give back what is not sent, let requests in flight
        finish for up to `grace` seconds, record. Call it on the engine's loop."""
        self._grace = grace
        self._stopping = True
        self._stop.set()

    # ------------------------------------------------------------ claiming

    async def _claimer(self) -> None:
        """Claim when due, when woken, and at once while claims come back
        full; while claims take anything, with up to MAX_PARALLEL_CLAIMS in
        flight, so that one claim's round trip overlaps the last one's (in a
        burst, the wait on the database was what held deliveries back, not
        the cores)."""
        claims: dict[asyncio.Future[Claimed], int] = {}  # a claim in flight → its limit
        claim_at = 0.0  # loop time of the next claim
        last_claim = float("-inf")
        failures = 0
        busy = False  # the last claim took something: events are falling due
        full = False  # and all it could: more is due now
        woken = self._loop.create_task(self._wake.wait())
        try:
            while not self._stopping or claims:
                now = self._loop.time()
                if woken.done():
                    self._wake.clear()
                    woken = self._loop.create_task(self._wake.wait())
                    if not failures:  # a failing database is waited out, woken or not
                        claim_at = min(claim_at, now)
                free = self.config.max_held - len(self._held)
                room = free - sum(claims.values())  # less what claims in flight may take
                self._note_room(free < self._min_claim())
                slots = (MAX_PARALLEL_CLAIMS if busy else 1) - len(claims)
                spacing = 0.0 if full else MIN_CLAIM_INTERVAL
                start_at = max(claim_at, last_claim + spacing)
                if not self._stopping and slots > 0 and room >= self._min_claim():
                    if now >= start_at:
                        limit = min(room, self.config.batch)
                        self._excluded = self.lanes.saturated()
                        look = time.time() >= self._clock_work_look_at
                        if look:
                            self._clock_work_look_at = time.time() + CLOCK_WORK_INTERVAL
                        claim = self._db(
                            deliveries_claim,
                            limit=limit,
                            exclude_bot_ids=self._excluded,
                            clock_work=look,
                        )
                        claims[claim] = limit
                        last_claim = now
                        continue
                    timeout: float | None = start_at - now
                elif self._stopping or claims:
                    timeout = None  # a claim in flight ends the wait
                else:
                    timeout = self.config.interval  # no room: the recorder wakes it
                waited: set[asyncio.Future[Any]] = {woken, *claims}
                done, _ = await asyncio.wait(
                    waited, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
                for claim in [c for c in claims if c in done]:
                    limit = claims.pop(claim)
                    try:
                        claimed = claim.result()
                    except Exception as exc:
                        failures += 1
                        _failed("Claiming due events", exc, failures)
                        busy = full = False
                        claim_at = self._loop.time() + failure_backoff(failures)
                        self._clock_work_look_at = 0.0  # it may have failed there
                        continue
                    _recovered("Claiming due events", failures)
                    failures = 0
                    if claimed.looked_at_clock_work:
                        self._clock_work_due = due = claimed.clock_work_due
                        if due is not None:
                            self._clock_work_look_at = min(self._clock_work_look_at, due)
                    self._accept(claimed)
                    full = len(claimed.event_ids) >= limit
                    busy = bool(claimed.event_ids)
                    claim_at = self._loop.time() + (0.0 if full else self._wait(claimed))
        finally:
            woken.cancel()

    def _wait(self, claimed: Claimed) -> float:
        """Seconds to the next claim after one that took all that was due."""
        wait = self.config.interval
        for due in (claimed.next_due, self._clock_work_due):
            if due is not None:
                wait = min(wait, due - time.time())
        return max(0.0, wait)

    def _note_room(self, lacking: bool) -> None:
        self._waiting_for_room = lacking
        if lacking and self.period.pause_started is None:
            self.period.pause_started = time.monotonic()
        elif not lacking:
            self._end_pause()

    def _min_claim(self) -> int:
        return max(1, int(self.config.max_held * MIN_CLAIM_SHARE))

    def _accept(self, claimed: Claimed) -> None:
        period = self.period
        period.claims += 1
        period.claimed += len(claimed.event_ids)
        if claimed.ignored:
            self._count(Counter(ignored=len(claimed.ignored)))
        for delivery in claimed.deliveries:
            period.claim_lag.add(claimed.claimed_at - delivery.due)
            metrics.claim_lag_observe(claimed.claimed_at - delivery.due)
            self._held[delivery.event_id] = delivery
            self.lanes.hold(delivery.bot_id)
            self.lanes.push(delivery)
        self._pump()

    # ------------------------------------------------------------ sending

    def _pump(self) -> None:
        """Send what the lanes allow."""
        now = time.time()
        while (delivery := self.lanes.pop()) is not None:
            if delivery.send_by < now:
                self.lanes.done(delivery.bot_id, seconds=None, congested=False, now=0.0)
                self._release([delivery])
                continue
            task = self._loop.create_task(self._send(delivery))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)
        if self.lanes.active > self.period.peak_in_flight:
            self.period.peak_in_flight = self.lanes.active

    async def _send(self, delivery: Delivery) -> None:
        timed = True  # the webhook's time, not a fault of ours, is in the result
        try:
            result = await self.client.post(delivery.request)
        except asyncio.CancelledError:
            self.lanes.done(delivery.bot_id, seconds=None, congested=False, now=0.0)
            self._release([delivery])
            raise
        except Exception as exc:
            # A fault of ours, not the receiver's: recorded as a failed
            # attempt, so the event is retried with backoff, not at once.
            logger.exception(
                "Sending %s failed",
                delivery.event_id,
                extra={
                    "event_id": delivery.event_id,
                    "bot_id": delivery.bot_id,
                    "attempt": delivery.attempt_count + 1,
                },
            )
            timed = False
            result = WebhookResult(
                started_at=datetime.now(UTC),
                duration_ms=0,
                failure=Failure.CONNECTION,
                error=f"The delivery failed on the platform's side: {exc.__class__.__name__}",
            )
        self.lanes.done(
            delivery.bot_id,
            seconds=result.duration_ms / 1000,
            congested=_congested(result),
            now=self._loop.time(),
        )
        self.period.attempt_ended(delivery.bot_id, result)
        lag = max(0.0, result.started_at.timestamp() - delivery.due)
        self.period.send_lag.add(lag)
        metrics.delivery_observe(
            seconds=result.duration_ms / 1000 if timed else None,
            lateness=lag if delivery.attempt_count == 0 else None,
        )
        self._finished.append((delivery, result))
        self._record_needed.set()
        self._pump()

    def _release(self, deliveries: Sequence[Delivery]) -> None:
        self._released.extend(deliveries)
        self._record_needed.set()

    async def _sweeper(self) -> None:
        while not self._stopping:
            await asyncio.sleep(EXPIRY_SWEEP_SECONDS)
            expired = self.lanes.take_expired(time.time())
            if expired:
                logger.warning(
                    "%d deliveries waited too long for their bot to answer the ones before "
                    "them; given back to be claimed again",
                    len(expired),
                )
                self._release(expired)

    # ------------------------------------------------------------ recording

    async def _recorder(self) -> None:
        failures = 0
        while True:
            if not self._finished and not self._released:
                if self._stopping and not self._sending:
                    return
                await self._record_needed.wait()
                self._record_needed.clear()
                continue
            if not self._stopping and len(self._finished) < RECORD_BATCH:
                await asyncio.sleep(RECORD_GATHER_SECONDS)
            finished = self._finished[:RECORD_BATCH]
            released = self._released
            del self._finished[:RECORD_BATCH]
            self._released = []
            try:
                tally = await self._db(_record, finished, released)
            except Exception as exc:
                failures += 1
                _failed("Recording deliveries", exc, failures)
                self._finished[:0] = finished
                self._released[:0] = released
                await asyncio.sleep(failure_backoff(failures))
                continue
            _recovered("Recording deliveries", failures)
            failures = 0
            self._count(tally)
            for delivery, _ in finished:
                self._unhold(delivery)
            for delivery in released:
                self._unhold(delivery)
            if self._room_came_back():
                self._wake.set()

    def _room_came_back(self) -> bool:
        """The claimer waits for room that is now free, or left out a bot
        that has room again."""
        if self._waiting_for_room:
            return self.config.max_held - len(self._held) >= self._min_claim()
        return bool(self._excluded) and set(self._excluded) - set(self.lanes.saturated()) != set()

    def _unhold(self, delivery: Delivery) -> None:
        if self._held.pop(delivery.event_id, None) is not None:
            self.lanes.unhold(delivery.bot_id)

    def _count(self, tally: Counter[str]) -> None:
        self.period.ended.update(tally)
        for status, outcome in _OUTCOMES.items():
            metrics.events_count(outcome, tally[status])

    # ------------------------------------------------------------ reporting

    async def _reporter(self) -> None:
        while True:
            await asyncio.sleep(self.config.report_interval)
            self.report()

    def report(self) -> None:
        """Log how the process kept up since the last report, if it did anything."""
        self._end_pause()
        period, now = self.period, time.monotonic()
        self.period = Period(started=now)
        if self._waiting_for_room:
            self.period.pause_started = now
        self.lanes.forget_idle(self._loop.time())
        if not period.busy and not self._held:
            return
        seconds = max(now - period.started, 1e-9)
        ended = ", ".join(f"{name} {count:,}" for name, count in sorted(period.ended.items()))
        cut = "; ".join(
            f"{lane.bot_id} {lane.limit} of {self.config.per_bot} "
            f"(answers in {lane.seconds:.1f} s, {lane.held} held)"
            for lane in self.lanes.throttled()[:3]
        )
        opened = self.client.connections_made - self._connections_reported
        self._connections_reported = self.client.connections_made
        attempts = ", ".join(f"{count:,} {kind}" for kind, count in sorted(period.attempts.items()))
        logger.info(
            "Deliveries in %.0f s: %s claimed in %s claims, %s attempts (%.0f/s: %s) over %s "
            "new connections; ended: %s. In flight %d of %d (peak %d), queued %d, held %d of %d; "
            "claims paused %.1f s for lack of room. Claim lag: %s. Due to sent: %s.%s",
            seconds,
            f"{period.claimed:,}",
            f"{period.claims:,}",
            f"{period.sent:,}",
            period.sent / seconds,
            attempts or "none",
            f"{opened:,}",
            ended or "none",
            self.lanes.active,
            self.config.concurrency,
            period.peak_in_flight,
            self.lanes.queued,
            len(self._held),
            self.config.max_held,
            period.paused,
            period.claim_lag.summary(),
            period.send_lag.summary(),
            f" Bots whose share is cut: {cut}." if cut else "",
        )
        self._report_failing(period, seconds)

    def _report_failing(self, period: Period, seconds: float) -> None:
        """A line per bot whose attempts failed, the most failing first."""
        failing = sorted(period.failing.items(), key=lambda item: -item[1].kinds.total())
        for bot_id, failures in failing[:FAILING_BOTS_REPORTED]:
            logger.info(
                "Deliveries to %s in %.0f s: %s",
                bot_id,
                seconds,
                failures.summary(),
                extra={"bot_id": bot_id},
            )
        if len(failing) > FAILING_BOTS_REPORTED:
            logger.info(
                "Deliveries to %d more bots failed in %.0f s",
                len(failing) - FAILING_BOTS_REPORTED,
                seconds,
            )

    def _end_pause(self) -> None:
        if self.period.pause_started is not None:
            self.period.paused += time.monotonic() - self.period.pause_started
            self.period.pause_started = None

    # ------------------------------------------------------------ stopping

    async def _shut_down(self, *tasks: asyncio.Task[None]) -> None:
        claimer, recorder, sweeper, reporter = tasks
        self._stopping = True
        self._wake.set()
        if self._wake_ups is not None:
            self._wake_ups.cancel()
            await asyncio.gather(self._wake_ups, return_exceptions=True)
        reporter.cancel()
        sweeper.cancel()
        # Let the claims in progress finish, so that what they took is known
        # and can be given back.
        await asyncio.gather(claimer, sweeper, return_exceptions=True)
        unsent = self.lanes.take_all()
        self._release(unsent)
        in_flight, cut_short = len(self._sending), 0
        if self._sending:
            _, late = await asyncio.wait(set(self._sending), timeout=self._grace)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
            cut_short = len(late)
        self._record_needed.set()
        await asyncio.gather(recorder, return_exceptions=True)
        self.report()
        await self.client.close()
        logger.info(
            "Deliveries stopped: %d requests were in flight, %d of them cut short and given "
            "back with %d unsent deliveries; %d events still held wait for their lease to end",
            in_flight,
            cut_short,
            len(unsent),
            len(self._held),
        )

    # ------------------------------------------------------------ database

    def _db(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> asyncio.Future[T]:
        return self._loop.run_in_executor(
            self._executor, partial(_on_db_thread, function, *args, **kwargs)
        )


_configured = threading.local()


def _on_db_thread(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    # The thread's connection is kept between calls (a worker process keeps
    # persistent ones); this closes it when too old or broken, as Django
    # does around a request.
    close_old_connections()
    if connection.vendor == "postgresql":
        connection.ensure_connection()
        if getattr(_configured, "connection", None) is not connection.connection:
            # Commits without waiting for the disk (EVENT_DELIVERY_ASYNC_COMMIT):
            # PostgreSQL may lose the last fraction of a second of them if it
            # crashes, which puts those events back where they were: due
            # again, or held under a lease that ends; they are delivered
            # again, as at least once allows. The engine's transactions are
            # many and small, and waiting for each flush held the whole
            # pipeline back.
            commit = "off" if settings.EVENT_DELIVERY_ASYNC_COMMIT else "on"
            with connection.cursor() as cursor:
                cursor.execute(f"SET synchronous_commit TO {commit}")
                # A worker cut off from the database in the middle of a
                # transaction leaves it open on the server, which sees no
                # reset (a partition, a proxy in between) and keeps its row
                # locks for hours: the claims of every other process skip
                # those events, so they are never delivered. The engine's
                # transactions are a few milliseconds of statements back to
                # back; one idle for half a lease was abandoned, and the
                # server ends it, which lets the events' leases run out.
                idle_ms = int(max(1.0, settings.EVENT_LEASE_SECONDS / 2) * 1000)
                cursor.execute(f"SET idle_in_transaction_session_timeout = {idle_ms}")
                # A session cut off in the middle of a statement (a COPY of
                # attempts waiting for its rows) is not idle, and holds the
                # locks of what its transaction updated before: the server's
                # keepalives find the host gone within about 25 s.
                cursor.execute(
                    "SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5;"
                    " SET tcp_keepalives_count = 3"
                )
            _configured.connection = connection.connection
    return function(*args, **kwargs)


def _record(
    finished: Sequence[tuple[Delivery, WebhookResult]], released: Sequence[Delivery]
) -> Counter[str]:
    tally = deliveries_record(finished) if finished else Counter()
    if released:
        tally[RELEASED] += deliveries_release(released)
    return tally


# What the engine's tallies count, as metrics call it: an event left pending
# after an attempt is to be retried.
_OUTCOMES = {
    EventStatus.PROCESSED: "delivered",
    EventStatus.PENDING: "retried",
    EventStatus.FAILED: "failed",
    EventStatus.IGNORED: "ignored",
}


def _congested(result: WebhookResult) -> bool:
    """The webhook did not answer, or said it is overloaded or failing."""
    code = result.status_code
    if code is None:
        return result.failure in (Failure.TIMEOUT, Failure.CONNECTION)
    return code == 429 or code >= 500


def _failed(what: str, exc: Exception, failures: int) -> None:
    """A failed database call of the engine, tried again with backoff: the
    database away (a restart) is expected and passes, so it is one line
    with its cause; anything else is a bug, and its trace is logged once."""
    if isinstance(exc, OperationalError):
        if failures == 1:
            cause = " ".join(str(exc).split())[:300]
            logger.warning("%s failed, trying again: %s: %s", what, type(exc).__name__, cause)
    else:
        logger.warning("%s failed", what, exc_info=failures == 1)


def _recovered(what: str, failures: int) -> None:
    if failures:
        logger.info("%s works again after %d failed tries", what, failures)
