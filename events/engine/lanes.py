"""Fair shares of a worker process's deliveries: one lane per bot.

A lane queues the bot's deliveries that are due. Two numbers bound what one
bot takes from a process:

- its requests in flight at once: at most EVENT_DELIVERY_PER_BOT. A webhook
  that times out, refuses connections or answers 429 or 5xx halves its lane's
  limit (at most once a second, down to FLOOR), and every other answer raises
  it by one, back to the cap: a black-holed webhook ends up holding FLOOR
  connections, not its cap, and a recovering one doubles back within a few
  round trips;
- its events the process holds (claimed, queued or in flight): no more than
  it expects to send within QUEUE_SECONDS at its limit and its recent answer
  time. A bot at that number is left out of the next claims, so its events
  wait in the table instead of in this process, where they would hold room
  that other bots need and could outlast their lease.

When the process's own cap on requests in flight (EVENT_DELIVERY_CONCURRENCY)
is the limit, freed slots go round-robin to the lanes with deliveries queued,
so one busy bot cannot take every slot from the others."""

from collections import deque
from collections.abc import Iterator

from events.engine.delivery import Delivery

# Seconds of sending, at a lane's limit and answer time, that a process holds
# of one bot's events.
QUEUE_SECONDS = 1.0
# The least a lane's limit is cut to.
FLOOR = 2
# Seconds between two cuts of a lane's limit: a burst of timeouts that all
# started together is one signal, not fifty.
CUT_INTERVAL = 1.0
# A bot's answer time before it has answered (seconds): cautious, so that a
# new bot is not given a large share before its speed is known.
FIRST_ESTIMATE = 1.0
# Weight of the newest answer time in a lane's running estimate.
SMOOTHING = 0.2
# An idle lane whose limit was cut is forgotten this long after its last cut.
FORGET_SECONDS = 600.0


class Lane:
    __slots__ = ("bot_id", "queue", "active", "held", "limit", "seconds", "last_cut", "ready")

    def __init__(self, bot_id: str, limit: int) -> None:
        self.bot_id = bot_id
        self.queue: deque[Delivery] = deque()
        self.active = 0  # requests in flight
        self.held = 0  # events held: waiting for their due time, queued, in flight or unrecorded
        self.limit = limit
        self.seconds = FIRST_ESTIMATE
        self.last_cut = float("-inf")
        self.ready = False  # in the round-robin of lanes that may send

    @property
    def can_send(self) -> bool:
        return bool(self.queue) and self.active < self.limit

    def hold_limit(self, most: int) -> int:
        expected = int(self.limit * QUEUE_SECONDS / max(self.seconds, 0.001))
        return min(most, max(self.limit, expected))


class Lanes:
    def __init__(self, *, concurrency: int, per_bot: int, max_held: int) -> None:
        self.concurrency = concurrency
        self.per_bot = per_bot
        self.floor = min(FLOOR, per_bot)
        self.max_held = max_held
        self.active = 0
        self.queued = 0
        self._lanes: dict[str, Lane] = {}
        self._ready: deque[Lane] = deque()

    def __iter__(self) -> Iterator[Lane]:
        return iter(self._lanes.values())

    def lane(self, bot_id: str) -> Lane:
        lane = self._lanes.get(bot_id)
        if lane is None:
            lane = self._lanes[bot_id] = Lane(bot_id, self.per_bot)
        return lane

    def hold(self, bot_id: str) -> None:
        self.lane(bot_id).held += 1

    def unhold(self, bot_id: str) -> None:
        self.lane(bot_id).held -= 1

    def push(self, delivery: Delivery) -> None:
        """Queue a delivery that is due."""
        lane = self.lane(delivery.bot_id)
        lane.queue.append(delivery)
        self.queued += 1
        self._maybe_ready(lane)

    def pop(self) -> Delivery | None:
        """The next delivery to send, taking a slot for it; None when every
        slot is taken or no lane may send."""
        while self._ready and self.active < self.concurrency:
            lane = self._ready.popleft()
            if not lane.can_send:
                lane.ready = False
                continue
            delivery = lane.queue.popleft()
            self.queued -= 1
            lane.active += 1
            self.active += 1
            if lane.can_send:
                self._ready.append(lane)
            else:
                lane.ready = False
            return delivery
        return None

    def done(self, bot_id: str, *, seconds: float | None, congested: bool, now: float) -> None:
        """A request of the bot's ended after `seconds` (None: it was never
        sent), `congested` when its webhook timed out, could not be reached
        or answered 429 or 5xx."""
        lane = self.lane(bot_id)
        lane.active -= 1
        self.active -= 1
        if seconds is not None:
            lane.seconds += SMOOTHING * (seconds - lane.seconds)
            if congested:
                if now - lane.last_cut >= CUT_INTERVAL:
                    lane.limit = max(self.floor, lane.limit // 2)
                    lane.last_cut = now
            elif lane.limit < self.per_bot:
                lane.limit += 1
        self._maybe_ready(lane)

    def saturated(self) -> list[str]:
        """Bots this process should claim no more events of for now."""
        return [
            lane.bot_id
            for lane in self._lanes.values()
            if lane.held >= lane.hold_limit(self.max_held)
        ]

    def take_expired(self, now: float) -> list[Delivery]:
        """Remove and answer the queued deliveries that can no longer start in time."""
        expired: list[Delivery] = []
        for lane in self._lanes.values():
            if any(d.send_by < now for d in lane.queue):
                expired += [d for d in lane.queue if d.send_by < now]
                lane.queue = deque(d for d in lane.queue if d.send_by >= now)
        self.queued -= len(expired)
        return expired

    def take_all(self) -> list[Delivery]:
        """Remove and answer every queued delivery (the process is stopping)."""
        taken = [delivery for lane in self._lanes.values() for delivery in lane.queue]
        for lane in self._lanes.values():
            lane.queue.clear()
        self.queued = 0
        return taken

    def forget_idle(self, now: float) -> None:
        """Drop lanes with nothing held, unless their limit was cut lately:
        a bot whose webhook just failed starts again small."""
        for bot_id in [
            bot_id
            for bot_id, lane in self._lanes.items()
            if lane.held == 0
            and lane.active == 0
            and (lane.limit == self.per_bot or now - lane.last_cut > FORGET_SECONDS)
        ]:
            lane = self._lanes.pop(bot_id)
            lane.ready = False

    def throttled(self) -> list[Lane]:
        """Lanes whose limit was cut below the cap, most held first."""
        cut = [lane for lane in self._lanes.values() if lane.limit < self.per_bot]
        return sorted(cut, key=lambda lane: -lane.held)

    def _maybe_ready(self, lane: Lane) -> None:
        if lane.can_send and not lane.ready:
            lane.ready = True
            self._ready.append(lane)
