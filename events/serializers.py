from typing import Any

from rest_framework import serializers

from platform_site.api.fields import (
    JSONObjectField,
    StrictCharField,
    StrictIntegerField,
    TimestampField,
)
from platform_site.api.ids import ID_MAX_LENGTH, ID_MIN_LENGTH
from platform_site.api.serializers import ClosedSerializer


def reference_field() -> StrictCharField:
    return StrictCharField(required=False, min_length=ID_MIN_LENGTH, max_length=ID_MAX_LENGTH)


class ScheduleSerializer(ClosedSerializer):
    dateTime = TimestampField(required=False)
    delay = StrictIntegerField(required=False, min_value=0)

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
