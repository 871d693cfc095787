"""What /metrics reads from the events table at each scrape: the delivery
backlog, as the database (the source of truth for what is due) has it, so
that it is right whichever worker processes run, or none. Every web process
reports the same platform-wide figures: aggregate them with max(), not sum()."""

import logging
from collections.abc import Iterator

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from events.models import Event
from platform_site.observability.metrics import NAMESPACE

logger = logging.getLogger(__name__)


class DeliveryBacklogCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        now = timezone.now()
        limit = settings.METRICS_BACKLOG_COUNT_LIMIT
        try:
            due_now = Event.objects.filter(next_attempt_at__lte=now).order_by()
            # Both by the index of what is due (event_next_attempt_idx): the
            # count stops at the limit, so a scrape costs the same with a
            # backlog of millions (a full count grew with it: 50x at 78k).
            due = due_now[:limit].count()
            oldest = (
                due_now.order_by("next_attempt_at")
                .values_list("next_attempt_at", flat=True)
                .first()
            )
        except DatabaseError as exc:
            # The processes' own metrics are still worth a scrape, the more
            # so while the database is out of reach: these are left out.
            logger.warning("metrics: the delivery backlog could not be read: %s", exc)
            return
        yield GaugeMetricFamily(
            f"{NAMESPACE}_events_due_unclaimed",
            "Events (and retries) due now that no worker has claimed yet, counted up to"
            " METRICS_BACKLOG_COUNT_LIMIT.",
            value=due,
        )
        yield GaugeMetricFamily(
            f"{NAMESPACE}_events_due_unclaimed_oldest_seconds",
            "How long the oldest due, unclaimed event has waited to be claimed (0: none waits).",
            value=max(0.0, (now - oldest).total_seconds()) if oldest else 0.0,
        )
