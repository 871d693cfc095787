"""The delivery engine of one worker process: an asyncio loop that claims due
events up to the room it has, holds those claimed ahead until they fall due,
sends them with many requests in flight (fairly across bots: lanes.py), and
records the outcomes in batches.

Four coroutines share the state:

- the claimer claims (events/dispatch.py) when woken (an event created due
  now, room freed after the process was full) or every
  EVENT_DISPATCH_INTERVAL, and at once again while claims come back full. It
  claims only while the process holds fewer than MAX_HELD_FACTOR × the
  concurrency, and leaves out the bots whose lanes are full, so that what it
  claims it can send before the lease ends (backpressure): a busy process
  stops claiming and the events wait in the table for one with room;
- the starter holds events claimed ahead in a heap by due time and starts
  them when due (a scheduled event becomes pending in one UPDATE per batch);
  once a second it gives back queued deliveries that could no longer be
  answered inside their lease;
- each request runs as a task of its own and hands its result over;
- the recorder writes the results that have piled up, in one transaction,
  as soon as the previous batch is written.

Database work runs on one thread of its own (the `db` executor), the loop
never waits on it, and every database call is a short transaction."""

import asyncio
import heapq
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

from django.conf import settings
from django.db import close_old_connections

from events.delivery import (
    Batch,
    Delivery,
    deliveries_prepare,
    deliveries_record,
    deliveries_release,
    deliveries_start,
)
from events.dispatch import Claim, events_claim_due
from events.engine.lanes import Lanes
from events.engine.stats import Period
from events.webhook_client import Failure, WebhookClient, WebhookResult

logger = logging.getLogger("events.engine")

T = TypeVar("T")

# A process holds at most this many times its concurrency: what is in flight,
# plus what is queued, claimed ahead or waiting to be recorded.
MAX_HELD_FACTOR = 2
# A claim waits for at least this share of the held limit to be free, so
# that a full process claims in batches rather than one event at a time.
MIN_CLAIM_SHARE = 0.1
# Results written per transaction, at most.
RECORD_BATCH = 1000
# Seconds between the starter's passes over queued deliveries for those
# that can no longer start in time.
EXPIRY_SWEEP_SECONDS = 1.0
# Longest wait between two tries of a failing database call.
MAX_BACKOFF_SECONDS = 10.0
# Counted for claims given back (released) unsent.
RELEASED = "released"


@dataclass(frozen=True)
class EngineConfig:
    concurrency: int  # requests in flight per process
    per_bot: int  # requests in flight to one bot
    batch: int  # events per claim, at most
    interval: float  # seconds between claims when nothing wakes the claimer
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
    def __init__(
        self,
        *,
        db: Executor,
        config: EngineConfig,
        client_factory: Callable[[], WebhookClient] = WebhookClient,
    ) -> None:
        self.config = config
        self._executor = db
        self._client_factory = client_factory
        self.lanes = Lanes(
            concurrency=config.concurrency, per_bot=config.per_bot, max_held=config.max_held
        )
        self._held: dict[str, Delivery] = {}
        self._heap: list[tuple[float, int, Delivery]] = []
        self._sequence = 0
        self._finished: list[tuple[Delivery, WebhookResult]] = []
        self._released: list[Delivery] = []
        self._sending: set[asyncio.Task[None]] = set()
        self._stopping = False
        self._grace = 0.0
        self._waiting_for_room = False
        self.period = Period(started=time.monotonic())
        self.totals: Counter[str] = Counter()

    # ------------------------------------------------------------ from outside

    async def run(self, *, on_ready: Callable[[], None] | None = None) -> None:
        """Deliver until `stop()`; then give back what was not sent."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._timers_changed = asyncio.Event()
        self._record_needed = asyncio.Event()
        self._stop = asyncio.Event()
        self.client = self._client_factory()
        claimer = asyncio.create_task(self._claimer(), name="claimer")
        starter = asyncio.create_task(self._starter(), name="starter")
        recorder = asyncio.create_task(self._recorder(), name="recorder")
        reporter = asyncio.create_task(self._reporter(), name="reporter")
        if on_ready is not None:
            on_ready()
        stopped = asyncio.create_task(self._stop.wait())
        try:
            done, _ = await asyncio.wait(
                {stopped, claimer, starter, recorder}, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stopped.cancel()
            await self._shut_down(claimer, starter, recorder, reporter)
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

    @property
    def held(self) -> int:
        return len(self._held)

    @property
    def in_flight(self) -> int:
        return self.lanes.active

    @property
    def claimed_ahead(self) -> int:
        return len(self._heap)

    # ------------------------------------------------------------ claiming

    async def _claimer(self) -> None:
        failures = 0
        while not self._stopping:
            room = self.config.max_held - len(self._held)
            self._waiting_for_room = room < self._min_claim()
            if self._waiting_for_room:
                if self.period.pause_started is None:
                    self.period.pause_started = time.monotonic()
            else:
                self._end_pause()
                limit = min(room, self.config.batch)
                try:
                    claim, batch = await self._db(_claim, limit, self.lanes.saturated())
                except Exception:
                    failures += 1
                    logger.warning("Claiming due events failed", exc_info=failures == 1)
                    await self._pause(_backoff(failures))
                    continue
                failures = 0
                self._accept(claim, batch)
                if len(claim.due) == limit:
                    continue  # more may be due: claim again at once
            await self._pause(self.config.interval)

    def _min_claim(self) -> int:
        return max(1, int(self.config.max_held * MIN_CLAIM_SHARE))

    async def _pause(self, seconds: float) -> None:
        try:
            async with asyncio.timeout(seconds):
                await self._wake.wait()
        except TimeoutError:
            pass
        self._wake.clear()

    def _accept(self, claim: Claim, batch: Batch) -> None:
        period = self.period
        period.claims += 1
        period.claimed += len(claim.due)
        self._count(batch.tally)
        for _, due in claim.due:
            if due <= claim.claimed_at:
                period.claim_lag.add((claim.claimed_at - due).total_seconds())
        now = time.time()
        loop_now = self._loop.time()
        ahead = False
        for delivery in batch.deliveries:
            self._held[delivery.event_id] = delivery
            self.lanes.hold(delivery.bot_id)
            if delivery.started:
                self.lanes.push(delivery)
            else:
                at = loop_now + (delivery.due.timestamp() - now)
                heapq.heappush(self._heap, (at, self._sequence, delivery))
                self._sequence += 1
                ahead = True
        if ahead:
            self._timers_changed.set()
        self._pump()

    # ------------------------------------------------------------ starting

    async def _starter(self) -> None:
        next_sweep = self._loop.time() + EXPIRY_SWEEP_SECONDS
        failures = 0
        while not self._stopping:
            now = self._loop.time()
            if now >= next_sweep:
                self._release_expired()
                next_sweep = now + EXPIRY_SWEEP_SECONDS
            wait = next_sweep - now
            if self._heap:
                wait = min(wait, self._heap[0][0] - now)
            if wait > 0:
                try:
                    async with asyncio.timeout(wait):
                        await self._timers_changed.wait()
                except TimeoutError:
                    pass
                self._timers_changed.clear()
                continue
            due: list[Delivery] = []
            while self._heap and self._heap[0][0] <= now:
                due.append(heapq.heappop(self._heap)[2])
            try:
                batch = await self._db(deliveries_start, due)
            except Exception:
                failures += 1
                logger.warning("Starting due deliveries failed", exc_info=failures == 1)
                retry_at = self._loop.time() + _backoff(failures)
                for delivery in due:
                    heapq.heappush(self._heap, (retry_at, self._sequence, delivery))
                    self._sequence += 1
                continue
            failures = 0
            self._count(batch.tally)
            going = {d.event_id for d in batch.deliveries}
            for delivery in due:
                if delivery.event_id not in going:
                    self._unhold(delivery)  # canceled, ignored or taken over
            for delivery in batch.deliveries:
                self.lanes.push(delivery)
            self._pump()

    def _release_expired(self) -> None:
        expired = self.lanes.take_expired(datetime.now(UTC))
        if expired:
            logger.warning(
                "%d deliveries waited too long for their bot to answer the ones before "
                "them; given back to be claimed again",
                len(expired),
            )
            self._release(expired)

    # ------------------------------------------------------------ sending

    def _pump(self) -> None:
        """Send what the lanes allow."""
        now: datetime | None = None
        while (delivery := self.lanes.pop()) is not None:
            now = now or datetime.now(UTC)
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
        try:
            result = await self.client.post(delivery.request())
        except asyncio.CancelledError:
            self.lanes.done(delivery.bot_id, seconds=None, congested=False, now=0.0)
            self._release([delivery])
            raise
        except Exception as exc:
            # A fault of ours, not the receiver's: recorded as a failed
            # attempt, so the event is retried with backoff, not at once.
            logger.exception("Sending %s failed", delivery.event_id)
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
        self.period.sent += 1
        self.period.send_lag.add(max(0.0, (result.started_at - delivery.due).total_seconds()))
        self._finished.append((delivery, result))
        self._record_needed.set()
        self._pump()

    def _release(self, deliveries: Sequence[Delivery]) -> None:
        self._released.extend(deliveries)
        self._record_needed.set()

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
            finished = self._finished[:RECORD_BATCH]
            released = self._released
            del self._finished[:RECORD_BATCH]
            self._released = []
            try:
                tally = await self._db(_record, finished, released)
            except Exception:
                failures += 1
                logger.warning("Recording deliveries failed", exc_info=failures == 1)
                self._finished[:0] = finished
                self._released[:0] = released
                await asyncio.sleep(_backoff(failures))
                continue
            failures = 0
            self._count(tally)
            for delivery, _ in finished:
                self._unhold(delivery)
            for delivery in released:
                self._unhold(delivery)
            if self._waiting_for_room and (
                self.config.max_held - len(self._held) >= self._min_claim()
            ):
                self._wake.set()

    def _unhold(self, delivery: Delivery) -> None:
        if self._held.pop(delivery.event_id, None) is not None:
            self.lanes.unhold(delivery.bot_id)

    def _count(self, tally: Counter[str]) -> None:
        self.period.ended.update(tally)
        self.totals.update(tally)

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
        throttled = self.lanes.throttled()[:3]
        cut = "; ".join(
            f"{lane.bot_id} {lane.limit} of {self.config.per_bot} "
            f"(answers in {lane.seconds:.1f} s, {lane.held} held)"
            for lane in throttled
        )
        logger.info(
            "Deliveries in %.0f s: %s claimed in %s claims, %s sent (%.0f/s); ended: %s. "
            "In flight %d of %d (peak %d), queued %d, claimed ahead %d, held %d of %d; "
            "claims paused %.1f s for lack of room. Claim lag: %s. Due to sent: %s.%s",
            seconds,
            f"{period.claimed:,}",
            f"{period.claims:,}",
            f"{period.sent:,}",
            period.sent / seconds,
            ended or "none",
            self.lanes.active,
            self.config.concurrency,
            period.peak_in_flight,
            self.lanes.queued,
            len(self._heap),
            len(self._held),
            self.config.max_held,
            period.paused,
            period.claim_lag.summary(),
            period.send_lag.summary(),
            f" Bots whose share is cut: {cut}." if cut else "",
        )

    def _end_pause(self) -> None:
        if self.period.pause_started is not None:
            self.period.paused += time.monotonic() - self.period.pause_started
            self.period.pause_started = None

    # ------------------------------------------------------------ stopping

    async def _shut_down(self, *tasks: asyncio.Task[None]) -> None:
        claimer, starter, recorder, reporter = tasks
        self._stopping = True
        self._wake.set()
        self._timers_changed.set()
        reporter.cancel()
        # Let a claim or a start in progress finish, so that what it took is
        # known and can be given back.
        await asyncio.gather(claimer, starter, return_exceptions=True)
        unsent = [entry[2] for entry in self._heap] + self.lanes.take_all()
        self._heap.clear()
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

    def _db(self, function: Callable[..., T], *args: Any) -> Awaitable[T]:
        return self._loop.run_in_executor(self._executor, partial(_on_db_thread, function, *args))


def _on_db_thread(function: Callable[..., T], *args: Any) -> T:
    # The thread's connection is kept between calls (a worker process keeps
    # persistent ones); this closes it when too old or broken, as Django
    # does around a request.
    close_old_connections()
    return function(*args)


def _claim(limit: int, exclude_bot_ids: list[str]) -> tuple[Claim, Batch]:
    claim = events_claim_due(limit=limit, exclude_bot_ids=exclude_bot_ids)
    return claim, deliveries_prepare(claim)


def _record(
    finished: Sequence[tuple[Delivery, WebhookResult]], released: Sequence[Delivery]
) -> Counter[str]:
    tally = deliveries_record(finished) if finished else Counter()
    if released:
        tally[RELEASED] += deliveries_release(released)
    return tally


def _congested(result: WebhookResult) -> bool:
    """The webhook did not answer, or said it is overloaded or failing."""
    code = result.status_code
    if code is None:
        return result.failure in (Failure.TIMEOUT, Failure.CONNECTION)
    return code == 429 or code >= 500


def _backoff(failures: int) -> float:
    return float(min(MAX_BACKOFF_SECONDS, 0.5 * 2 ** min(failures - 1, 10)))
