"""The bodies of the runtime's state routes (/v1/chat/states/{type}/{id}/{name}),
as the official client sends them."""

import math
from typing import Any

from rest_framework.fields import empty

from chat.models import STATE_EXPIRY_MAX_MS, STATE_PAYLOAD_MAX_BYTES
from platform_site.api.fields import JSONObjectField, StrictNumberField
from platform_site.api.serializers import ClosedSerializer

_PAYLOAD_HELP = (
    f"The state's content: a JSON object of at most {STATE_PAYLOAD_MAX_BYTES} bytes as"
    " compact JSON (413 beyond)"
)


class ExpiryField(StrictNumberField):
    """Milliseconds, a JSON number as the hosted API types it (its own
    example is 1296000000.5): kept as whole milliseconds, rounded up."""

    def run_validation(self, data: Any = empty) -> int | None:
        # After the bounds are checked on the number as sent.
        value = super().run_validation(data)
        return None if value is None else math.ceil(value)


def _expiry(**kwargs: Any) -> ExpiryField:
    return ExpiryField(
        min_value=1,
        max_value=STATE_EXPIRY_MAX_MS,
        allow_null=True,
        help_text=(
            "Milliseconds of idleness after which the state expires (each write starts"
            " them again; a fraction is rounded up); null for none"
        ),
        **kwargs,
    )


class StateSetSerializer(ClosedSerializer):
    """The body of setState: a null payload deletes the state; an expiry
    left out keeps the state's own."""

    payload = JSONObjectField(allow_null=True, help_text=f"{_PAYLOAD_HELP}; null deletes the state")
    expiry = _expiry(required=False)


class StatePatchSerializer(ClosedSerializer):
    """The body of patchState: the payload's top-level keys replace the
    state's; an expiry left out keeps the state's own."""

    payload = JSONObjectField(help_text=_PAYLOAD_HELP)
    expiry = _expiry(required=False)


class StateGetOrSetSerializer(ClosedSerializer):
    """The body of getOrSetState: what the state is made with, if absent."""

    payload = JSONObjectField(help_text=_PAYLOAD_HELP)
    expiry = _expiry(required=False)


class StateExpirySerializer(ClosedSerializer):
    """The body of setStateExpiry."""

    expiry = _expiry()
