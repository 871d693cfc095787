"""The query parameters of the runtime API's chat lists (tags aside: see
platform_site.foundation.tags), which the selectors narrow their lists by."""

import django_filters
from django.db.models import Exists, OuterRef, QuerySet
from django.http import QueryDict

from bots.models import Message, Participant, User
from platform_site.foundation.domain_errors import InvalidFilter
from platform_site.foundation.ids import ID_MAX_LENGTH, ID_MIN_LENGTH

PARTICIPANT_IDS_MAX = 20


def _id_filter(field_name: str, method: str | None = None) -> django_filters.CharFilter:
    # Held to its length as sent, unstripped, as the OpenAPI document says.
    return django_filters.CharFilter(
        field_name=field_name,
        method=method,
        min_length=ID_MIN_LENGTH,
        max_length=ID_MAX_LENGTH,
        strip=False,
    )


class MessageFilter(django_filters.FilterSet):
    """`GET /v1/chat/messages`."""

    conversationId = _id_filter("conversation_id")

    class Meta:
        model = Message
        fields: list[str] = []


class UserFilter(django_filters.FilterSet):
    """`GET /v1/chat/users`: `conversationId` keeps the participants of that conversation."""

    conversationId = _id_filter("conversation_id", method="filter_participants_of")

    class Meta:
        model = User
        fields: list[str] = []

    def filter_participants_of(
        self, queryset: QuerySet[User], name: str, value: str
    ) -> QuerySet[User]:
        return queryset.filter(
            Exists(Participant.objects.filter(conversation_id=value, user=OuterRef("pk")))
        )


def participant_ids_param(query: QueryDict) -> list[str]:
    """`participantIds` of `GET /v1/chat/conversations`, repeated as
    `participantIds=a&participantIds=b` or, as some HTTP clients write arrays,
    `participantIds[]=a&participantIds[]=b`. Empty values are ignored, but
    count, as repeated ones do: the limit is on what the client sends."""
    sent = [*query.getlist("participantIds"), *query.getlist("participantIds[]")]
    if len(sent) > PARTICIPANT_IDS_MAX:
        raise InvalidFilter(f"participantIds: at most {PARTICIPANT_IDS_MAX} ids")
    ids = sorted({value for value in sent if value})
    for value in ids:
        if not ID_MIN_LENGTH <= len(value) <= ID_MAX_LENGTH:
            raise InvalidFilter(
                f"participantIds: {value[:40]!r} is not an id"
                f" ({ID_MIN_LENGTH} to {ID_MAX_LENGTH} characters)"
            )
    return ids
