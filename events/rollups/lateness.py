"""Delivery lateness (how long after its due time an event's first attempt
started) kept as counts in fixed buckets: counts add up across minutes and
workspaces, where percentiles would not, and a percentile of the merged
counts is then known to within its bucket."""

import math
from collections.abc import Sequence

# Upper bounds of the buckets, in seconds; one more bucket counts the rest.
LATENESS_BOUNDS: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
# The rollup's column for each bucket, in the order of the bounds, then the rest.
LATENESS_FIELDS: tuple[str, ...] = (
    "late_50ms",
    "late_100ms",
    "late_250ms",
    "late_500ms",
    "late_1s",
    "late_2_5s",
    "late_5s",
    "late_10s",
    "late_30s",
    "late_1min",
    "late_5min",
    "late_over_5min",
)
assert len(LATENESS_FIELDS) == len(LATENESS_BOUNDS) + 1


def lateness_percentile(counts: Sequence[int], fraction: float) -> int | None:
    """The index of the bucket that holds the given fraction (0.5 for the
    median) of the counted attempts; None when none were counted."""
    total = sum(counts)
    if not total:
        return None
    # The smallest bucket whose running total reaches the rank: nearest-rank.
    rank = max(1, math.ceil(total * fraction))
    running = 0
    for index, count in enumerate(counts):
        running += count
        if running >= rank:
            return index
    return len(counts) - 1


def lateness_label(bucket: int | None) -> str:
    """What a bucket says of its attempts: `≤ 250 ms`, `≤ 2.5 s`, `> 5 min`."""
    if bucket is None:
        return "no first attempts"
    if bucket >= len(LATENESS_BOUNDS):
        return f"> {_duration(LATENESS_BOUNDS[-1])}"
    return f"≤ {_duration(LATENESS_BOUNDS[bucket])}"


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:g} ms"
    if seconds < 60:
        return f"{seconds:g} s"
    return f"{seconds / 60:g} min"
