"""Settings that would let one event be delivered twice in normal operation."""

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Warning, register


@register()
def lease_outlasts_a_delivery(**kwargs: Any) -> list[CheckMessage]:
    # A tick may claim an event again LOOKAHEAD seconds before its lease ends;
    # a delivery must be able to time out and be recorded before that.
    room = settings.EVENT_LEASE_SECONDS - settings.EVENT_DISPATCH_LOOKAHEAD
    if room > settings.EVENT_DELIVERY_TIMEOUT + 5:
        return []
    return [
        Warning(
            "EVENT_LEASE_SECONDS leaves too little time for a delivery: a slow one "
            "may be claimed again and sent twice.",
            hint="Make EVENT_LEASE_SECONDS more than EVENT_DISPATCH_LOOKAHEAD + "
            "EVENT_DELIVERY_TIMEOUT + 5.",
            id="events.W001",
        )
    ]
