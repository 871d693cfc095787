"""What /metrics reads from the events table at each scrape: the delivery
backlog, as the database (the source of truth for what is due) has it, so
that it is right whichever worker processes run, or none. Every web process
reports the same platform-wide figures: aggregate them with max(), not sum()."""

import logging
from collections.abc import Iterator

from django.db import DatabaseError
from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from events.models import Event
from platform_site.metrics import NAMESPACE

logger = logging.getLogger(__name__)


class DeliveryBacklogCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        now = timezone.now()
        try:
            # The index of what is due (event_next_attempt_idx) answers both.
            backlog = Event.objects.filter(next_attempt_at__lte=now).aggregate(
                due=Count("next_attempt_at"), oldest=Min("next_attempt_at")
            )
        except DatabaseError as exc:
            # The processes' own metrics are still worth a scrape, the more
            # so while the database is out of reach: these are left out.
            logger.warning("metrics: the delivery backlog could not be read: %s", exc)
            return
        yield GaugeMetricFamily(
            f"{NAMESPACE}_events_due_unclaimed",
            "Events (and retries) due now that no worker has claimed yet.",
            value=backlog["due"],
        )
        oldest = backlog["oldest"]
        yield GaugeMetricFamily(
            f"{NAMESPACE}_events_due_unclaimed_oldest_seconds",
            "How long the oldest due, unclaimed event has waited to be claimed (0: none waits).",
            value=max(0.0, (now - oldest).total_seconds()) if oldest else 0.0,
        )
