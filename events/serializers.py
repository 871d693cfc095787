from platform_site.api.fields import (
    JSONObjectField,
    ReferenceField,
    StrictCharField,
    StrictIntegerField,
    TimestampField,
)
from platform_site.api.schema import id_pattern
from platform_site.api.serializers import ClosedSerializer
from platform_site.foundation.ids import ID_MAX_LENGTH, ID_MIN_LENGTH


def reference_field(prefix: str) -> ReferenceField:
    return ReferenceField(
        pattern=id_pattern(prefix),
        required=False,
        min_length=ID_MIN_LENGTH,
        max_length=ID_MAX_LENGTH,
    )


# A delay is at most a hundred years (in milliseconds): far enough for any
# schedule, near enough that the due time is always a date the server keeps.
SCHEDULE_DELAY_MAX = 100 * 365 * 24 * 60 * 60 * 1000


class ScheduleSerializer(ClosedSerializer):
    dateTime = TimestampField(required=False)
    delay = StrictIntegerField(required=False, min_value=0, max_value=SCHEDULE_DELAY_MAX)
    exactly_one_of = ("dateTime", "delay")


class EventCreateSerializer(ClosedSerializer):
    type = StrictCharField(min_length=1, max_length=200)
    payload = JSONObjectField()
    schedule = ScheduleSerializer(required=False)
    conversationId = reference_field("conv")
    userId = reference_field("user")
    messageId = reference_field("msg")
    workflowId = reference_field("wf")
