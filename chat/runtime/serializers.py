from typing import Any

from rest_framework import serializers

from chat.message_payloads import PAYLOAD_TYPES, MessagePayloadField
from events.serializers import ScheduleSerializer
from platform_site.api.fields import (
    TAG_KEY_MAX_LENGTH,
    TAGS_MAX_COUNT,
    JSONObjectField,
    ReferenceField,
    RemovableTagsField,
    StrictCharField,
    StrictChoiceField,
    TagsField,
)
from platform_site.api.ids import ID_MAX_LENGTH, ID_MIN_LENGTH
from platform_site.api.schema import id_pattern
from platform_site.api.serializers import ClosedSerializer

MESSAGE_ORIGINS = ["synthetic"]


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
    discriminateByTags = serializers.ListField(
        child=StrictCharField(min_length=1, max_length=TAG_KEY_MAX_LENGTH),
        max_length=TAGS_MAX_COUNT,
        required=False,
    )
