from datetime import UTC, datetime
from typing import Any

from rest_framework import serializers

from platform_site.api.fields import JSONObjectField, StrictCharField, StrictIntegerField
from platform_site.api.ids import ID_MAX_LENGTH, ID_MIN_LENGTH
from platform_site.api.serializers import ClosedSerializer


def reference_field() -> StrictCharField:
    return StrictCharField(required=False, min_length=ID_MIN_LENGTH, max_length=ID_MAX_LENGTH)


class ScheduleSerializer(ClosedSerializer):
    dateTime = StrictCharField(required=False)
    delay = StrictIntegerField(required=False, min_value=0)

    def validate_dateTime(self, value: str) -> datetime:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise serializers.ValidationError(
                "Must be an ISO 8601 date and time, such as 2026-11-22T10:00:00.000Z."
            ) from None
        if moment.tzinfo is None:
            raise serializers.ValidationError("Must carry a timezone, such as Z or +02:00.")
        try:
            return moment.astimezone(UTC)
        except OverflowError:
            raise serializers.ValidationError("Is out of the supported range of dates.") from None

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("dateTime" in attrs) == ("delay" in attrs):
            raise serializers.ValidationError("Give exactly one of dateTime or delay.")
        return attrs


class EventCreateSerializer(ClosedSerializer):
    type = StrictCharField(min_length=1, max_length=200)
    payload = JSONObjectField()
    schedule = ScheduleSerializer(required=False)
    conversationId = reference_field()
    userId = reference_field()
    messageId = reference_field()
    workflowId = reference_field()
