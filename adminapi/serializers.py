from typing import Any

from rest_framework import serializers

from adminapi.bot_logs import LOG_LEVELS
from bots.models import AuditAction, Role
from platform_site.api.fields import (
    HttpUrlField,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    TagsField,
    TimestampField,
)
from platform_site.api.serializers import ClosedSerializer

BOT_NAME_MAX_LENGTH = 200
WEBHOOK_URL_MAX_LENGTH = 2000
# An e-mail address may become the account's username, which holds 150 characters.
EMAIL_MAX_LENGTH = 150


class BotListQuery(serializers.Serializer):
    dev = StrictChoiceField(choices=["true", "false"], required=False)
    sortField = StrictChoiceField(choices=["createdAt", "updatedAt"], default="createdAt")
    sortDirection = StrictChoiceField(choices=["asc", "desc"], default="desc")


class BotWriteSerializer(ClosedSerializer):
    """The body of a create and of an update: an update changes the fields it names."""

    name = StrictCharField(min_length=1, max_length=BOT_NAME_MAX_LENGTH, required=False)
    tags = TagsField(required=False)
    dev = StrictBooleanField(required=False)
    webhookUrl = HttpUrlField(
        max_length=WEBHOOK_URL_MAX_LENGTH,
        allow_blank=True,
        allow_null=True,
        required=False,
        help_text='An http or https URL; "" or null clears it.',
    )

    def validate_webhookUrl(self, value: str | None) -> str:
        return value or ""


class MemberCreateSerializer(ClosedSerializer):
    email = serializers.EmailField(max_length=EMAIL_MAX_LENGTH)
    role = StrictChoiceField(choices=Role.values)


class MemberUpdateSerializer(ClosedSerializer):
    role = StrictChoiceField(choices=Role.values)


class AuditRecordQuery(serializers.Serializer):
    action = StrictChoiceField(choices=AuditAction.values, required=False)
    actorId = serializers.RegexField(
        r"^[0-9]{1,18}$",
        required=False,
        error_messages={"invalid": "Must be an account id (digits)."},
    )


class BotLogQuery(serializers.Serializer):
    timeStart = TimestampField(required=False)
    timeEnd = TimestampField(required=False)
    level = StrictChoiceField(choices=list(LOG_LEVELS), required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        start, end = attrs.get("timeStart"), attrs.get("timeEnd")
        if start is not None and end is not None and start > end:
            raise serializers.ValidationError({"timeStart": ["Must not be after timeEnd."]})
        return attrs
