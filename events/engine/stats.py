"""How a worker process's deliveries keep up, told in one log line per
EVENT_DELIVERY_REPORT_INTERVAL: what was claimed, sent and recorded, what is
in flight and held, how late claims and sends came, and the bots whose
share was cut because their webhook is failing."""

import random
from collections import Counter
from dataclasses import dataclass, field

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


@dataclass
class Period:
    """What happened since the last report."""

    started: float
    claims: int = 0
    claimed: int = 0
    sent: int = 0
    ended: Counter[str] = field(default_factory=Counter)
    claim_lag: Sample = field(default_factory=Sample)  # due → claimed, for events due when claimed
    send_lag: Sample = field(default_factory=Sample)  # due → request sent
    peak_in_flight: int = 0
    paused: float = 0.0  # seconds with no room to claim
    pause_started: float | None = None

    @property
    def busy(self) -> bool:
        return bool(self.claimed or self.sent or sum(self.ended.values()))
