"""The service's Prometheus metrics, counted in every web and worker process
and summed over them when /metrics is scraped (platform_site/api/metrics_endpoint.py).

prometheus-client's multiprocess mode: each process writes its values to
memory-mapped files of its own in METRICS_DIR (PROMETHEUS_MULTIPROC_DIR,
which settings set for every process they start), and a scrape reads them
all (platform_site/observability/metrics_files.py). Counters and histograms of processes
that ended stay counted; a gauge counts only live processes (livesum). With
METRICS_ENABLED off, nothing is recorded and no file is written.

Recording goes through the small functions below, which do nothing when
METRICS_ENABLED is off; a label set's child is looked up once per process,
as `labels()` costs more than the increment itself."""

import os
from collections.abc import Callable
from functools import cache
from typing import TypeVar

from django.conf import settings
from prometheus_client import Counter, Gauge, Histogram, values
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.multiprocess import mark_process_dead

from platform_site.observability.metrics_files import HostMetrics

# The value class is chosen when prometheus_client is imported: multiprocess
# only if the variable was set by then. Settings set it; this makes sure of
# it should anything have imported the client before them.
values.ValueClass = values.get_value_class()

NAMESPACE = "platform"
# Seconds: from a fast API answer to a webhook at its timeout.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Seconds: scheduled work that is due, from on time to an hour late.
LATENESS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)
INDEXING_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0)

HTTP_REQUESTS = Counter(
    "http_requests",
    "HTTP requests answered, by route template, method and status.",
    ["route", "method", "status"],
    namespace=NAMESPACE,
)
HTTP_DURATION = Histogram(
    "http_request_duration_seconds",
    "Time from the request reaching Django to its answer's headers (a stream goes on after).",
    ["route", "method"],
    namespace=NAMESPACE,
    buckets=LATENCY_BUCKETS,
)
EVENTS = Counter(
    "events",
    "Events by what happened to them: created, delivered, retried (a failed attempt "
    "to be retried), failed (given up), ignored (no webhook) and canceled.",
    ["outcome"],
    namespace=NAMESPACE,
)
DELIVERY_DURATION = Histogram(
    "event_delivery_duration_seconds",
    "Time a bot's webhook took to answer a delivery (or to fail it).",
    namespace=NAMESPACE,
    buckets=LATENCY_BUCKETS,
)
DELIVERY_LATENESS = Histogram(
    "event_delivery_lateness_seconds",
    "Time from an event falling due to its first delivery attempt.",
    namespace=NAMESPACE,
    buckets=LATENESS_BUCKETS,
)
CLAIM_LAG = Histogram(
    "event_claim_lag_seconds",
    "Time from an event (or a retry) falling due to a worker claiming it.",
    namespace=NAMESPACE,
    buckets=LATENESS_BUCKETS,
)
FILES_INDEXED = Counter(
    "files_indexed",
    "Indexing runs that ended, by outcome (indexing_completed, indexing_failed).",
    ["outcome"],
    namespace=NAMESPACE,
)
INDEXING_DURATION = Histogram(
    "file_indexing_duration_seconds",
    "Time an indexing run took, whatever its outcome.",
    namespace=NAMESPACE,
    buckets=INDEXING_BUCKETS,
)
LIVE_LISTENERS = Gauge(
    "live_stream_listeners",
    "Open live streams (chat listeners), by workspace.",
    ["workspace"],
    namespace=NAMESPACE,
    multiprocess_mode="livesum",
)
RATE_LIMIT_REJECTIONS = Counter(
    "rate_limit_rejections",
    "Requests refused with 429, by the limit they ran out of.",
    ["limit"],
    namespace=NAMESPACE,
)

M = TypeVar("M", bound=MetricWrapperBase)


def _child(metric: M) -> Callable[..., M]:
    @cache
    def child(*labels: str) -> M:
        return metric.labels(*labels)

    return child


_http_requests = _child(HTTP_REQUESTS)
_http_duration = _child(HTTP_DURATION)
_events = _child(EVENTS)
_files_indexed = _child(FILES_INDEXED)
_live_listeners = _child(LIVE_LISTENERS)
_rate_limit_rejections = _child(RATE_LIMIT_REJECTIONS)


def http_request_observe(*, route: str, method: str, status: int, seconds: float) -> None:
    if settings.METRICS_ENABLED:
        _http_requests(route, method, str(status)).inc()
        _http_duration(route, method).observe(seconds)


def events_count(outcome: str, count: int = 1) -> None:
    if settings.METRICS_ENABLED and count:
        _events(outcome).inc(count)


def event_created() -> None:
    events_count("created")


def event_canceled() -> None:
    events_count("canceled")


def delivery_observe(*, seconds: float | None, lateness: float | None) -> None:
    """A delivery attempt: how long the webhook took (None when the attempt
    failed on the platform's side), and `lateness` for an event's first."""
    if settings.METRICS_ENABLED:
        if seconds is not None:
            DELIVERY_DURATION.observe(seconds)
        if lateness is not None:
            DELIVERY_LATENESS.observe(max(0.0, lateness))


def claim_lag_observe(seconds: float) -> None:
    if settings.METRICS_ENABLED:
        CLAIM_LAG.observe(max(0.0, seconds))


def indexing_observe(*, outcome: str, seconds: float) -> None:
    if settings.METRICS_ENABLED:
        _files_indexed(outcome).inc()
        INDEXING_DURATION.observe(seconds)


def indexing_given_up() -> None:
    """A file failed without a run ending: its runs were lost (worker killed)."""
    if settings.METRICS_ENABLED:
        _files_indexed("indexing_failed").inc()


def live_listener_change(*, workspace_id: str, change: int) -> None:
    if settings.METRICS_ENABLED:
        _live_listeners(workspace_id).inc(change)


def rate_limit_rejected(limit: str) -> None:
    if settings.METRICS_ENABLED:
        _rate_limit_rejections(limit).inc()


def live_listeners_by_workspace() -> dict[str, int]:
    """Open live-stream listeners per workspace id, over every web process
    (read from the metric files: no database, no network)."""
    if not settings.METRICS_ENABLED:
        return {}
    counts: dict[str, int] = {}
    for family in HostMetrics().collect():
        if family.name != f"{NAMESPACE}_live_stream_listeners":
            continue
        for sample in family.samples:
            workspace = sample.labels.get("workspace")
            if workspace and sample.value > 0:
                counts[workspace] = counts.get(workspace, 0) + int(sample.value)
    return counts


def _forget_this_process_gauges() -> None:
    # A process whose id was another's, killed before it could say so,
    # would start from that one's live gauges (its open listeners).
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        mark_process_dead(os.getpid())


_forget_this_process_gauges()
os.register_at_fork(after_in_child=_forget_this_process_gauges)
