from typing import Any

from rest_framework import serializers

from chat.message_payloads import PAYLOAD_TYPES, MessagePayloadField
from events.rollups.models import ANALYTICS_NAME_MAX_LENGTH
from events.serializers import ScheduleSerializer
from platform_site.api.fields import (
    TAG_KEY_MAX_LENGTH,
    TAGS_MAX_COUNT,
    HttpUrlField,
    JSONObjectField,
    ReferenceField,
    RemovableTagsField,
    StrictCharField,
    StrictChoiceField,
    StrictIntegerField,
    TagChangesField,
    TagsField,
)
from platform_site.api.schema import id_pattern
from platform_site.api.serializers import ClosedSerializer
from platform_site.foundation.ids import ID_MAX_LENGTH, ID_MIN_LENGTH

MESSAGE_ORIGINS = ["synthetic"]


def discriminate_by_tags_field() -> serializers.ListField:
    """The names of the tags a get-or-create matches on (platform_site.foundation.tags.TagMatch)."""
    return serializers.ListField(
        child=StrictCharField(min_length=1, max_length=TAG_KEY_MAX_LENGTH),
        max_length=TAGS_MAX_COUNT,
        required=False,
    )


def _reference(*prefixes: str) -> ReferenceField:
    return ReferenceField(
        pattern=id_pattern(*prefixes), min_length=ID_MIN_LENGTH, max_length=ID_MAX_LENGTH
    )


class BotMessageCreateSerializer(ClosedSerializer):
    """The body of `POST /v1/chat/messages`. The hosted API's clients send the
    type beside the payload (`{"type": "text", "payload": {"text": …}}`), the
    chat interface's inside it; either is taken, both when they agree."""

    payload = JSONObjectField()
    conversationId = _reference("conv")
    # A user of the bot, or the bot itself (bots of the hosted API reply as `ctx.botId`).
    userId = _reference("user", "bot")
    type = StrictChoiceField(choices=list(PAYLOAD_TYPES), required=False)
    tags = TagsField(required=False, default=dict)
    origin = StrictChoiceField(choices=MESSAGE_ORIGINS, required=False)
    schedule = ScheduleSerializer(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        payload = attrs.get("payload")
        if payload is None:  # only where it is optional
            return attrs
        declared = attrs.get("type")
        carried = payload.get("type")
        if declared is not None and isinstance(carried, str) and carried != declared:
            raise serializers.ValidationError(
                {"type": [f"{declared!r} does not agree with payload.type {carried!r}."]}
            )
        if declared is not None and carried is None:
            # Kept inside the payload too: the chat interface and the live
            # stream show payloads that carry their type.
            payload = {**payload, "type": declared}
        try:
            attrs["payload"] = MessagePayloadField().run_validation(payload)
        except serializers.ValidationError as error:
            raise serializers.ValidationError({"payload": error.detail}) from None
        return attrs


class BotMessageGetOrCreateSerializer(BotMessageCreateSerializer):
    """The body of `POST /v1/chat/messages/get-or-create`: that of a create,
    whose payload is needed only when no message matches, tags that may be
    null or empty (left out), and the tags to match on."""

    payload = JSONObjectField(required=False)
    tags = RemovableTagsField(required=False, default=dict)
    discriminateByTags = discriminate_by_tags_field()


# --- users ---------------------------------------------------------------------


def _integration_name() -> StrictCharField:
    return StrictCharField(
        min_length=1,
        max_length=200,
        required=False,
        help_text="Deprecated: the name of an integration installed on the bot (else 400)",
    )


class RuntimeUserCreateSerializer(ClosedSerializer):
    """The body of `POST /v1/chat/users`."""

    tags = TagsField(required=False, default=dict)
    integrationName = _integration_name()
    name = StrictCharField(required=False, allow_blank=True, max_length=200)
    pictureUrl = HttpUrlField(required=False, allow_blank=True)
    properties = TagsField(required=False, default=dict)
    attributes = TagsField(required=False, default=dict, help_text="Deprecated: properties")


class RuntimeUserGetOrCreateSerializer(RuntimeUserCreateSerializer):
    """The body of `POST /v1/chat/users/get-or-create`: that of a create whose
    maps may give null or "" (left out), and the tags to match on."""

    tags = RemovableTagsField(required=False, default=dict)
    properties = RemovableTagsField(required=False, default=dict)
    attributes = RemovableTagsField(required=False, default=dict, help_text="Deprecated")
    discriminateByTags = discriminate_by_tags_field()


class RuntimeUserUpdateSerializer(ClosedSerializer):
    """The body of `PUT /v1/chat/users/{id}`: what is given changes; null or
    "" clears a field or removes a key of a map."""

    tags = TagChangesField(required=False)
    name = StrictCharField(required=False, allow_blank=True, allow_null=True, max_length=200)
    pictureUrl = HttpUrlField(required=False, allow_blank=True, allow_null=True)
    attributes = TagChangesField(required=False, help_text="Deprecated: properties")
    properties = TagChangesField(required=False)

    def validate_name(self, value: str | None) -> str:
        return value or ""

    def validate_pictureUrl(self, value: str | None) -> str:
        return value or ""


# --- conversations ---------------------------------------------------------------


def _channel() -> StrictCharField:
    return StrictCharField(min_length=1, max_length=200)


class RuntimeConversationCreateSerializer(ClosedSerializer):
    """The body of `POST /v1/chat/conversations`."""

    channel = _channel()
    tags = TagsField(required=False, default=dict)
    integrationName = _integration_name()
    properties = TagsField(required=False, default=dict)


class RuntimeConversationGetOrCreateSerializer(RuntimeConversationCreateSerializer):
    """The body of `POST /v1/chat/conversations/get-or-create`."""

    tags = RemovableTagsField(required=False, default=dict)
    properties = RemovableTagsField(required=False, default=dict)
    discriminateByTags = discriminate_by_tags_field()


class RuntimeConversationUpdateSerializer(ClosedSerializer):
    """The body of `PUT /v1/chat/conversations/{id}`."""

    currentTaskId = StrictCharField(
        required=False, allow_blank=True, help_text="Deprecated and ignored, as by the hosted API"
    )
    tags = TagChangesField(required=False)
    properties = TagChangesField(required=False)


class RuntimeParticipantAddSerializer(ClosedSerializer):
    """The body of `POST /v1/chat/conversations/{id}/participants`."""

    userId = _reference("user")


# --- messages and analytics ----------------------------------------------------


class BotMessageUpdateSerializer(ClosedSerializer):
    """The body of `PUT /v1/chat/messages/{id}`: tags merged (null or ""
    removes one), and a payload of the message's type that replaces its own
    (`type` may be left out of it)."""

    tags = TagChangesField(required=False)
    payload = JSONObjectField(required=False)


# A call counts at most this much: more in one call is a client's mistake.
ANALYTICS_COUNT_MAX = 1_000_000


class AnalyticsTrackSerializer(ClosedSerializer):
    """The body of `POST /v1/chat/analytics`."""

    name = StrictCharField(min_length=1, max_length=ANALYTICS_NAME_MAX_LENGTH)
    count = StrictIntegerField(min_value=1, max_value=ANALYTICS_COUNT_MAX)
