"""Settings that would let one event be delivered twice in normal operation."""

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register

from events.engine.delivery import RECORD_SECONDS


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


@register()
def delivery_shares_make_sense(**kwargs: Any) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    if settings.EVENT_DELIVERY_CONCURRENCY < 0:
        errors.append(
            Error(
                "EVENT_DELIVERY_CONCURRENCY is negative.",
                hint="Requests in flight per worker process: 0 (no deliveries) or more.",
                id="events.E001",
            )
        )
    if settings.EVENT_DELIVERY_PER_BOT < 1:
        errors.append(
            Error(
                "EVENT_DELIVERY_PER_BOT is less than 1: no bot could be sent anything.",
                hint="Requests in flight to one bot per worker process: 1 or more.",
                id="events.E002",
            )
        )
    if settings.EVENT_DISPATCH_INTERVAL <= 0 or settings.EVENT_DISPATCH_BATCH < 1:
        errors.append(
            Error(
                "EVENT_DISPATCH_INTERVAL must be more than 0 and EVENT_DISPATCH_BATCH at least 1.",
                id="events.E003",
            )
        )
    return errors
