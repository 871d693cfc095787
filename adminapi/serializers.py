from typing import Any

from rest_framework import serializers

from bots.models import AuditAction, DeliveryFormat, Role
from bots.models.bot import MAX_EXECUTION_TIME_MAX
from bots.selectors.audit_records import HOSTED_AUDIT_ACTIONS
from events.selectors.attempts import LOG_LEVELS
from platform_site.api.fields import (
    HttpUrlField,
    JSONObjectField,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictIntegerField,
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


class BotConfigurationSerializer(ClosedSerializer):
    # A field named `data` would hide Serializer.data: declared here instead.
    def get_fields(self) -> dict[str, serializers.Field]:
        return {
            "data": JSONObjectField(
                help_text=(
                    "The bot's configuration: sent with every delivery in `botpress` format "
                    "(x-bp-configuration), where the SDK hands it to handlers as "
                    "ctx.configuration. At most 8 KiB of JSON; not a place for secrets."
                )
            )
        }


class BotWriteSerializer(ClosedSerializer):
    """The body of a create and of an update: an update changes the fields it
    names. The webhook URL is `url`, as the hosted API names it, or
    `webhookUrl`, as this service first did: not both at once."""

    at_most_one_of = ("url", "webhookUrl")

    name = StrictCharField(min_length=1, max_length=BOT_NAME_MAX_LENGTH, required=False)
    tags = TagsField(required=False)
    dev = StrictBooleanField(required=False)
    url = HttpUrlField(
        max_length=WEBHOOK_URL_MAX_LENGTH,
        allow_blank=True,
        allow_null=True,
        required=False,
        help_text='The webhook URL, http or https; "" or null clears it.',
    )
    webhookUrl = HttpUrlField(
        max_length=WEBHOOK_URL_MAX_LENGTH,
        allow_blank=True,
        allow_null=True,
        required=False,
        help_text="The same as url, under this service's first name for it: send one of them.",
    )

    deliveryFormat = StrictChoiceField(
        choices=DeliveryFormat.values,
        required=False,
        help_text=(
            "How events are POSTed to the webhook: `standard` (the event, signed in the "
            "Standard Webhooks format; the default) or `botpress` (the request a bot written "
            "with the official SDK reads: x-bot-id, x-bp-* headers and `{event}`, signed too)."
        ),
    )
    maxExecutionTime = StrictIntegerField(
        min_value=1,
        max_value=MAX_EXECUTION_TIME_MAX,
        allow_null=True,
        required=False,
        help_text=(
            "Seconds a delivery waits for the bot's answer, 1 to 300; null: the workspace's "
            "webhook timeout (10 s unless staff changed it)."
        ),
    )
    configuration = BotConfigurationSerializer(required=False)

    def validate_url(self, value: str | None) -> str:
        return value or ""

    def validate_webhookUrl(self, value: str | None) -> str:
        return value or ""

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """`webhookUrl`, under either name; the configuration's data."""
        if "url" in attrs:
            attrs["webhookUrl"] = attrs.pop("url")
        if "configuration" in attrs:
            attrs["configuration"] = attrs["configuration"]["data"]
        return attrs


class MemberCreateSerializer(ClosedSerializer):
    email = serializers.EmailField(max_length=EMAIL_MAX_LENGTH)
    role = StrictChoiceField(choices=Role.values)
    sendEmail = StrictBooleanField(
        required=False,
        help_text="Taken for the hosted API's clients, and ignored: this service sends no e-mail.",
    )


class MemberUpdateSerializer(ClosedSerializer):
    role = StrictChoiceField(
        choices=Role.values,
        required=False,
        help_text="Left out, nothing changes and the member is answered as it is.",
    )


class AuditRecordQuery(serializers.Serializer):
    action = StrictChoiceField(
        choices=[*AuditAction.values, *sorted(set(HOSTED_AUDIT_ACTIONS.values()))],
        required=False,
        help_text="This service's name of an action (bot.updated), or the hosted API's"
        " (UPDATE_BOT), which may name several.",
    )
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
