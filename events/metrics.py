"""What /metrics reads from the events table at each scrape: the delivery
backlog, as the database (the source of truth for what is due) has it, so
that it is right whichever worker processes run, or none."""

from collections.abc import Iterator

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from events.models import Event
from platform_site.metrics import NAMESPACE


class DeliveryBacklogCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        now = timezone.now()
        # The index of what is due (event_next_attempt_idx) answers both.
        backlog = Event.objects.filter(next_attempt_at__lte=now).aggregate(
            due=Count("next_attempt_at"), oldest=Min("next_attempt_at")
        )
        yield GaugeMetricFamily(
            f"{NAMESPACE}_events_due_unclaimed",
            "Events (and retries) due now that no worker has claimed yet.",
            value=backlog["due"],
        )
        oldest = backlog["oldest"]
        yield GaugeMetricFamily(
            f"{NAMESPACE}_events_claim_lag_seconds",
            "How long the oldest due, unclaimed event has waited (0 when none waits).",
            value=max(0.0, (now - oldest).total_seconds()) if oldest else 0.0,
        )
