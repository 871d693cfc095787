"""The shapes the events API answers, for the OpenAPI document only
(events.presenters builds the JSON)."""

from rest_framework import serializers

from events.models import EventStatus
from platform_site.api.answers import JsonObjectAnswerField, answer_of, page_of


class EventSerializer(serializers.Serializer):
    id = serializers.CharField()
    createdAt = serializers.DateTimeField()
    type = serializers.CharField()
    payload = JsonObjectAnswerField()
    status = serializers.ChoiceField(choices=EventStatus.values)
    failureReason = serializers.CharField(allow_null=True, help_text="null until it fails")
    conversationId = serializers.CharField(required=False, help_text="When linked to one")
    userId = serializers.CharField(required=False, help_text="When linked to one")
    messageId = serializers.CharField(required=False, help_text="When linked to one")


EventAnswerSerializer = answer_of(EventSerializer, "event")
EventPageSerializer = page_of(EventSerializer, "events")
