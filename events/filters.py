import django_filters

from events.models import Event, EventStatus
from platform_site.foundation.ids import ID_MAX_LENGTH, ID_MIN_LENGTH


# No stripping of whitespace: the value is held to its length as sent, as
# the OpenAPI document says (platform_site.api.schema.query_id_filter).
def _id_filter(field_name: str) -> django_filters.CharFilter:
    return django_filters.CharFilter(
        field_name=field_name, min_length=ID_MIN_LENGTH, max_length=ID_MAX_LENGTH, strip=False
    )


class EventFilter(django_filters.FilterSet):
    """The query parameters of `GET /v1/chat/events`."""

    type = django_filters.CharFilter(field_name="type", max_length=200, strip=False)
    conversationId = _id_filter("conversation_id")
    userId = _id_filter("user_id")
    messageId = _id_filter("message_id")
    workflowId = _id_filter("workflow_id")
    status = django_filters.ChoiceFilter(
        choices=EventStatus.choices,
        error_messages={
            "invalid_choice": f"Must be one of: {', '.join(EventStatus.values)}.",
        },
    )

    class Meta:
        model = Event
        fields: list[str] = []
