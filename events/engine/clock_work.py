"""Work of other apps that falls due on the delivery clock.

The claims tick (events/engine/claims.py) is the one clock of what is due.
An app whose rows fall due too (chat's scheduled bot messages) registers
here from its AppConfig.ready, so that each claim first makes its due rows
real and the tick wakes for them, without the engine importing that app:
the arrows keep pointing from chat to events.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class ClockWork:
    # Makes what is due at `now` real, in transactions of its own.
    publish: Callable[..., object]
    # When its next row falls due after `after` (its first row with None),
    # or None.
    next_due: Callable[..., datetime | None]


_registered: dict[str, ClockWork] = {}


def clock_work_register(name: str, work: ClockWork) -> None:
    """Once per process; registering a name again replaces it."""
    _registered[name] = work


def clock_work_run(*, now: datetime) -> float | None:
    """Make what is due at `now` real, for each work whose first row is due
    (a lookup each, and nothing more when none is: the common case); when
    the next row falls due after that, as seconds since the epoch, or None."""
    moments = []
    for work in _registered.values():
        first = work.next_due(after=None)
        if first is not None and first <= now:
            work.publish(now=now)
            first = work.next_due(after=now)
        if first is not None:
            moments.append(first.timestamp())
    return min(moments, default=None)
