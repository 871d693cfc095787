"""What the dashboard shows, read from the rollups (never the events
table): a fixed number of queries, whatever the number of events."""

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, F, Max, OuterRef, QuerySet, Subquery, Sum

from bots.models import Bot
from events.rollups.lateness import LATENESS_FIELDS, lateness_label, lateness_percentile
from events.rollups.models import AnalyticsMinute, BotFailureMinute, EventMinute
from events.services.rollups import MINUTE, minute_floor
from files.models import File, FileStatus
from platform_site.observability.metrics import live_listeners_by_workspace

HOUR_MINUTES = 60
DAY_MINUTES = 24 * 60
# The day drawn in quarter hours (on the clock's): 96 points, a readable
# line at the chart's width.
DAY_BIN_MINUTES = 15
DAY_BINS = DAY_MINUTES // DAY_BIN_MINUTES
FAILING_BOTS_SHOWN = 5
TRACKED_NAMES_SHOWN = 10


@dataclass(frozen=True)
class Timeline:
    """Events created, delivered and failed per minute: one point a minute,
    or a bin's average per minute (over its minutes that have ended); and
    how many in all over the hour or the day."""

    times: list[datetime]
    created: list[float]
    delivered: list[float]
    failed: list[float]
    totals: dict[str, int]

    @property
    def empty(self) -> bool:
        return not any(self.totals.values())


@dataclass(frozen=True)
class Lateness:
    """Percentiles of first attempts' lateness, as the bucket that holds them."""

    p50: str
    p99: str
    counted: int


@dataclass(frozen=True)
class FailingBot:
    bot_id: str
    name: str
    workspace_name: str
    failed: int
    last_failure_reason: str
    last_failure_at: datetime


@dataclass(frozen=True)
class TrackedName:
    """What a bot counted under a name with trackAnalytics."""

    name: str
    bot_name: str
    count: int


@dataclass(frozen=True)
class DashboardFigures:
    # The last complete minute's end: the figures stop there.
    until: datetime
    hour: Timeline
    day: Timeline
    hour_lateness: Lateness
    day_lateness: Lateness
    failing_bots: list[FailingBot]
    # The bots' own counts, most first.
    analytics: list[TrackedName]
    # (status, files) for every status, in the order of FileStatus.
    indexing: list[tuple[str, int]]
    live_listeners: int


def dashboard_figures(*, workspace_ids: Collection[str] | None, now: datetime) -> DashboardFigures:
    """The figures of the given workspaces (None: the whole platform) up to
    the last complete minute before `now`."""
    until = minute_floor(now)
    day_start = until - DAY_MINUTES * MINUTE
    if workspace_ids is not None and not workspace_ids:
        minutes: dict[datetime, dict[str, Any]] = {}
        failing: list[FailingBot] = []
        tracked: list[TrackedName] = []
        files: dict[str, int] = {}
    else:
        minutes = _minutes(_scope(EventMinute.objects.all(), workspace_ids), day_start, until)
        failing = _failing_bots(
            _scope(BotFailureMinute.objects.all(), workspace_ids), day_start, until
        )
        tracked = _tracked_names(
            _scope(AnalyticsMinute.objects.all(), workspace_ids), day_start, until
        )
        files = _files_by_status(workspace_ids)
    listeners = live_listeners_by_workspace()
    hour_start = until - HOUR_MINUTES * MINUTE
    # The quarter hour that holds the last minute ended is the day's last bin.
    last_bin = until - MINUTE
    last_bin -= (last_bin.minute % DAY_BIN_MINUTES) * MINUTE
    day_bins_start = last_bin - (DAY_BINS - 1) * DAY_BIN_MINUTES * MINUTE
    return DashboardFigures(
        until=until,
        hour=_timeline(minutes, hour_start, until, HOUR_MINUTES, 1),
        day=_timeline(minutes, day_start, until, DAY_BINS, DAY_BIN_MINUTES, day_bins_start),
        hour_lateness=_lateness(row for minute, row in minutes.items() if minute >= hour_start),
        day_lateness=_lateness(minutes.values()),
        failing_bots=failing,
        analytics=tracked,
        indexing=[(status, files.get(status, 0)) for status in FileStatus.values],
        live_listeners=sum(
            count
            for workspace, count in listeners.items()
            if workspace_ids is None or workspace in workspace_ids
        ),
    )


def _scope(queryset: QuerySet[Any], workspace_ids: Collection[str] | None) -> QuerySet[Any]:
    if workspace_ids is None:
        return queryset
    return queryset.filter(workspace_id__in=list(workspace_ids))


def _minutes(
    rollups: QuerySet[EventMinute], start: datetime, end: datetime
) -> dict[datetime, dict[str, Any]]:
    """Each minute's counts summed over the workspaces: 1,440 rows at most."""
    counted = ("created", "delivered", "failed", *LATENESS_FIELDS)
    rows = (
        rollups.filter(minute__gte=start, minute__lt=end)
        .values("minute")
        .annotate(**{f"sum_{field}": Sum(field) for field in counted})
        .order_by()
    )
    return {row["minute"]: {field: row[f"sum_{field}"] for field in counted} for row in rows}


def _timeline(
    minutes: dict[datetime, dict[str, Any]],
    start: datetime,
    until: datetime,
    points: int,
    bin_minutes: int,
    bins_start: datetime | None = None,
) -> Timeline:
    """Totals from `start` to `until`; `points` bins of `bin_minutes` from
    `bins_start` (or `start`)."""
    first = start if bins_start is None else bins_start
    times = [first + index * bin_minutes * MINUTE for index in range(points)]
    series: dict[str, list[float]] = {"created": [], "delivered": [], "failed": []}
    for time in times:
        ended = [time + offset * MINUTE for offset in range(bin_minutes)]
        ended = [minute for minute in ended if minute < until]
        rows = [minutes[minute] for minute in ended if minute in minutes]
        for name, values in series.items():
            values.append(sum(row[name] for row in rows) / max(len(ended), 1))
    counted = [row for minute, row in minutes.items() if start <= minute < until]
    totals = {name: sum(row[name] for row in counted) for name in series}
    return Timeline(times=times, totals=totals, **series)


def _lateness(rows: Iterable[dict[str, Any]]) -> Lateness:
    counts = [0] * len(LATENESS_FIELDS)
    for row in rows:
        for index, field in enumerate(LATENESS_FIELDS):
            counts[index] += row[field]
    return Lateness(
        p50=lateness_label(lateness_percentile(counts, 0.5)),
        p99=lateness_label(lateness_percentile(counts, 0.99)),
        counted=sum(counts),
    )


def _failing_bots(
    rollups: QuerySet[BotFailureMinute], start: datetime, end: datetime
) -> list[FailingBot]:
    """The bots with the most failed attempts in those minutes, in two queries:
    the totals, then the five bots' names and last reasons (a reason beside
    the totals would be looked up for every minute summed, not every bot)."""
    recent = rollups.filter(minute__gte=start, minute__lt=end)
    totals = list(
        recent.values("bot_id")
        .annotate(total=Sum("failed"), last_at=Max("last_failure_at"))
        .order_by("-total", "bot_id")[:FAILING_BOTS_SHOWN]
    )
    if not totals:
        return []
    last_reason = (
        recent.filter(bot_id=OuterRef("pk"))
        .order_by("-last_failure_at")
        .values("last_failure_reason")[:1]
    )
    bots = {
        bot["pk"]: bot
        for bot in Bot.objects.filter(pk__in=[row["bot_id"] for row in totals])
        .values("pk", "name", "workspace__name")
        .annotate(reason=Subquery(last_reason))
    }
    return [
        FailingBot(
            bot_id=row["bot_id"],
            name=bots[row["bot_id"]]["name"],
            workspace_name=bots[row["bot_id"]]["workspace__name"],
            failed=row["total"],
            last_failure_reason=bots[row["bot_id"]]["reason"],
            last_failure_at=row["last_at"],
        )
        for row in totals
    ]


def _tracked_names(
    rollups: QuerySet[AnalyticsMinute], start: datetime, end: datetime
) -> list[TrackedName]:
    """The names counted most in those minutes, each with its bot (a name is
    its bot's own), in one GROUP BY."""
    totals = (
        rollups.filter(minute__gte=start, minute__lt=end)
        .values("name", "bot_id", bot_name=F("bot__name"))
        .annotate(total=Sum("count"))
        .order_by("-total", "name", "bot_id")[:TRACKED_NAMES_SHOWN]
    )
    return [TrackedName(row["name"], row["bot_name"], row["total"]) for row in totals]


def _files_by_status(workspace_ids: Collection[str] | None) -> dict[str, int]:
    """Files by status, in one GROUP BY."""
    files = File.objects.all()
    if workspace_ids is not None:
        files = files.filter(bot__workspace_id__in=list(workspace_ids))
    rows = files.values("status").annotate(count=Count("pk")).order_by()
    return {row["status"]: row["count"] for row in rows}
