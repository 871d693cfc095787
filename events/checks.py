"""Settings that would let one event be delivered twice in normal operation."""

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Warning, register

from events.delivery import RECORD_SECONDS


@register()
def lease_outlasts_a_delivery(**kwargs: Any) -> list[CheckMessage]:
    # Another process may claim an event again once its lease ends; a
    # delivery must be able to time out and be recorded before that.
    if settings.EVENT_LEASE_SECONDS > settings.EVENT_DELIVERY_TIMEOUT + RECORD_SECONDS:
        return []
    return [
        Warning(
            "EVENT_LEASE_SECONDS leaves too little time for a delivery: a slow one "
            "may be claimed again and sent twice.",
            hint=f"Make EVENT_LEASE_SECONDS more than EVENT_DELIVERY_TIMEOUT + {RECORD_SECONDS:g}.",
            id="events.W001",
        )
    ]
