"""How a worker process's deliveries keep up, told in one log line per
EVENT_DELIVERY_REPORT_INTERVAL: what was claimed, what its requests came to
(answered, could not connect, timed out) and recorded, what is in flight and
held, how late claims and sends came, and the bots whose share was cut
because their webhook is failing; then a line per bot whose attempts failed,
with their counts and the last reason. Each failed attempt is logged on its
own at DEBUG only: a webhook that refuses every connection would otherwise
write a line per attempt, hundreds a second."""

import random
from collections import Counter
from dataclasses import dataclass, field

from events.engine.verdicts import judge
from events.engine.webhook_client import Failure, WebhookResult

# Lags kept per report for the percentiles: a uniform sample beyond that.
SAMPLE_SIZE = 10_000


class Sample:
    """A uniform sample of a report period's values (reservoir sampling)."""

    def __init__(self) -> None:
        self.values: list[float] = []
        self.seen = 0

    def add(self, value: float) -> None:
        self.seen += 1
        if len(self.values) < SAMPLE_SIZE:
            self.values.append(value)
        else:
            slot = random.randrange(self.seen)
            if slot < SAMPLE_SIZE:
                self.values[slot] = value

    def summary(self) -> str:
        if not self.values:
            return "none"
        ordered = sorted(self.values)

        def at(q: float) -> float:
            return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

        return f"p50 {at(0.5):.0f} ms, p99 {at(0.99):.0f} ms, max {ordered[-1] * 1000:.0f} ms"


# What an attempt's request came to, as the reports word it.
ANSWERED = "answered"
REFUSED = "could not connect"  # refused, unreachable, a URL that cannot be reached
TIMED_OUT = "timed out"


def attempt_kind(result: WebhookResult) -> str:
    if result.status_code is not None:
        return ANSWERED
    return TIMED_OUT if result.failure == Failure.TIMEOUT else REFUSED


@dataclass
class BotFailures:
    """A bot's failed attempts in a period, by what their request came to."""

    kinds: Counter[str] = field(default_factory=Counter)
    last_reason: str = ""

    def summary(self) -> str:
        words = {ANSWERED: "answered with an error"}
        counts = ", ".join(
            f"{count:,} {words.get(kind, kind)}" for kind, count in sorted(self.kinds.items())
        )
        return f"failed attempts: {self.kinds.total():,} ({counts}); last: {self.last_reason}"


@dataclass
class Period:
    """What happened since the last report."""

    started: float
    claims: int = 0
    claimed: int = 0
    sent: int = 0  # requests whose attempt ended, however it did
    attempts: Counter[str] = field(default_factory=Counter)  # by attempt_kind
    failing: dict[str, BotFailures] = field(default_factory=dict)
    ended: Counter[str] = field(default_factory=Counter)
    claim_lag: Sample = field(default_factory=Sample)  # due → claimed, for events due when claimed
    send_lag: Sample = field(default_factory=Sample)  # due → request sent
    peak_in_flight: int = 0
    paused: float = 0.0  # seconds with no room to claim
    pause_started: float | None = None

    def attempt_ended(self, bot_id: str, result: WebhookResult) -> None:
        self.sent += 1
        kind = attempt_kind(result)
        self.attempts[kind] += 1
        if kind == ANSWERED and 200 <= (result.status_code or 0) < 300:
            return
        failures = self.failing.setdefault(bot_id, BotFailures())
        failures.kinds[kind] += 1
        failures.last_reason = judge(result).reason

    @property
    def busy(self) -> bool:
        return bool(self.claimed or self.sent or sum(self.ended.values()))
