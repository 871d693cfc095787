"""Bot messages stored to be made later (services/scheduled_messages.py makes them)."""

from datetime import datetime

from chat.models import ScheduledMessage


def scheduled_message_next_due(*, after: datetime) -> datetime | None:
    """When the next scheduled message falls due, if one is later than `after`."""
    moment: datetime | None = (
        ScheduledMessage.objects.filter(due_at__gt=after)
        .order_by("due_at")
        .values_list("due_at", flat=True)
        .first()
    )
    return moment
