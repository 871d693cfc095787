"""What the benchmarks print: progress on stderr, percentiles, latency
spreads, the background-load warning and the correctness verdict."""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any


def log(message: str) -> None:
    """Progress, on stderr (stdout holds the figures)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between closest ranks."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def spread(values: Sequence[float]) -> str:
    """p50, p90, p99 and max of latencies in seconds, as ms."""
    if not values:
        return "no samples"
    return (
        f"p50 {ms(percentile(values, 50))}  p90 {ms(percentile(values, 90))}  "
        f"p99 {ms(percentile(values, 99))}  max {ms(max(values))}  (n={len(values)})"
    )


def lateness_line(label: str, values: Sequence[float]) -> str:
    """One labelled line of p50, p90, p99 and max of lateness in seconds, as ms."""
    ms_values = [v * 1000 for v in values]
    if not ms_values:
        return f"  {label:34s} (none)"
    return (
        f"  {label:34s} p50 {percentile(ms_values, 50):8.1f}  "
        f"p90 {percentile(ms_values, 90):8.1f}  "
        f"p99 {percentile(ms_values, 99):8.1f}  max {max(ms_values):8.1f} ms"
    )


def indent(text: str, prefix: str = "   ") -> str:
    """Every line of `text` after `prefix` (a CPU report under its phase)."""
    return prefix + text.replace("\n", "\n" + prefix)


def profiled(
    call: Callable[[], Any], calls: int, timer: Callable[[], float] | None = None
) -> cProfile.Profile:
    """A cProfile of `calls` calls of `call` (wall time, or `timer`'s)."""
    profiler = cProfile.Profile(timer) if timer is not None else cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        call()
    profiler.disable()
    return profiler


def profile_text(profiler: cProfile.Profile, order: str, top: int) -> str:
    """cProfile's table of the `top` functions by `order`, without its header."""
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.strip_dirs().sort_stats(order).print_stats(top)
    return out.getvalue().split("\n", 4)[-1]


def background_warning(noisy: Sequence[str]) -> None:
    """The phases ("name cores") during which other processes took more than
    BACKGROUND_LIMIT cores, if any."""
    if noisy:
        print(f"  WARNING: background load (cores) during {', '.join(noisy)}: figures understated")


def verdict(failures: Sequence[str], passed: str) -> int:
    """The correctness checks' outcome as the scripts with a RESULT block
    print it; the exit status."""
    if failures:
        print("CORRECTNESS CHECKS FAILED:")
        for failure in failures:
            print(f"  - {failure}")
        return 1
    print(passed)
    return 0


def failed_lines(failures: Sequence[str], passed: str | None = None) -> int:
    """One `FAILED:` line per failed check (or `passed`, when given and none
    failed); the exit status."""
    for failure in failures:
        print(f"FAILED: {failure}")
    if passed is not None and not failures:
        print(passed)
    return 1 if failures else 0
