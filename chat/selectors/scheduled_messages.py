"""Bot messages stored to be made later (services/scheduled_messages.py makes them)."""

from datetime import datetime

from chat.models import ScheduledMessage


def scheduled_message_next_due(*, after: datetime | None) -> datetime | None:
    """When the next scheduled message falls due, if one is later than
    `after` (the first of all with None)."""
    messages = ScheduledMessage.objects.all()
    if after is not None:
        messages = messages.filter(due_at__gt=after)
    moment: datetime | None = messages.order_by("due_at").values_list("due_at", flat=True).first()
    return moment
