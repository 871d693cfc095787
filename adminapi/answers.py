"""The shapes the admin API answers, for the OpenAPI document only: the
presenters build the JSON, and these describe it as the hosted API's clients
type it."""

from rest_framework import serializers

from bots.models import DeliveryFormat, Role
from bots.selectors.audit_records import HOSTED_AUDIT_ACTIONS
from events.selectors.attempts import LOG_LEVELS
from platform_site.api.answers import PageMetaSerializer, TagsAnswerField


class BotSummarySerializer(serializers.Serializer):
    """A bot, as the list shows it."""

    id = serializers.RegexField(r"^bot_[0-9A-HJKMNP-TV-Z]{26}$")
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()
    name = serializers.CharField(allow_blank=True)
    tags = TagsAnswerField()
    deployedAt = serializers.DateTimeField(required=False, help_text="Left out until deployed")


class InstalledIntegrationSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField(allow_blank=True)
    version = serializers.CharField(allow_blank=True)
    enabled = serializers.BooleanField()


class BotConfigurationAnswerSerializer(serializers.Serializer):
    # A field named `data` would hide Serializer.data: declared here instead.
    def get_fields(self) -> dict[str, serializers.Field]:
        return {
            "data": serializers.DictField(help_text="Sent with each `botpress` delivery"),
            "schema": serializers.DictField(help_text="Always empty: no schema is kept"),
        }


class BotDetailSerializer(BotSummarySerializer):
    """A bot. Its webhook URL is `url`, the hosted API's name for it, and also
    `webhookUrl`, this service's first one; both are left out when it has none."""

    dev = serializers.BooleanField()
    url = serializers.CharField(required=False, help_text="The webhook URL")
    webhookUrl = serializers.CharField(required=False, help_text="The same as url")
    deliveryFormat = serializers.ChoiceField(choices=DeliveryFormat.values)
    maxExecutionTime = serializers.IntegerField(
        required=False, help_text="Left out when the workspace's webhook timeout applies"
    )
    configuration = BotConfigurationAnswerSerializer()
    integrations = serializers.DictField(
        child=InstalledIntegrationSerializer(), help_text="The installed integrations, by alias"
    )


class BotAnswerSerializer(serializers.Serializer):
    bot = BotDetailSerializer()


class BotListSerializer(serializers.Serializer):
    bots = BotSummarySerializer(many=True)
    meta = PageMetaSerializer()


class WorkspaceMemberSerializer(serializers.Serializer):
    """A member of the workspace, as the hosted API's clients type it."""

    id = serializers.RegexField(r"^member_[0-9A-HJKMNP-TV-Z]{26}$")
    userId = serializers.CharField(required=False, help_text="The member's account")
    # An account made by staff may have no address.
    email = serializers.CharField(allow_blank=True)
    createdAt = serializers.DateTimeField()
    role = serializers.ChoiceField(choices=Role.values)
    displayName = serializers.CharField(
        required=False, help_text="The account's full name, when it has one"
    )


class WorkspaceMemberListSerializer(serializers.Serializer):
    members = WorkspaceMemberSerializer(many=True)
    meta = PageMetaSerializer()


class AuditRecordSerializer(serializers.Serializer):
    """One change to the workspace, as the hosted API's clients type it."""

    id = serializers.RegexField(r"^audit_[0-9A-HJKMNP-TV-Z]{26}$")
    recordedAt = serializers.DateTimeField()
    userId = serializers.CharField(
        allow_null=True, help_text="The account that made the change; null for the platform"
    )
    userEmail = serializers.CharField(
        required=False,
        allow_null=True,
        help_text='Its e-mail address (or username) when the change was made; "platform" for it',
    )
    resourceId = serializers.CharField(allow_null=True, help_text="The changed object's id")
    resourceName = serializers.CharField(
        required=False, allow_null=True, help_text="The changed bot's name or member's account"
    )
    value = serializers.CharField(
        required=False, allow_null=True, help_text="What changed, as a JSON object in a string"
    )
    action = serializers.ChoiceField(choices=sorted(set(HOSTED_AUDIT_ACTIONS.values())))


class AuditRecordListSerializer(serializers.Serializer):
    records = AuditRecordSerializer(many=True)
    meta = PageMetaSerializer()


class BotLogSerializer(serializers.Serializer):
    """A delivery attempt of one of the bot's events, as a log line."""

    timestamp = serializers.DateTimeField()
    level = serializers.ChoiceField(choices=sorted(LOG_LEVELS))
    message = serializers.CharField()
    eventId = serializers.CharField()
    attempt = serializers.IntegerField()
    durationMs = serializers.IntegerField()
    url = serializers.CharField(allow_blank=True)
    statusCode = serializers.IntegerField(required=False, help_text="When the webhook answered")


class BotLogPageSerializer(serializers.Serializer):
    logs = BotLogSerializer(many=True)
    meta = PageMetaSerializer()
    nextToken = serializers.CharField(
        required=False,
        help_text="The same as meta.nextToken, where the hosted API's clients read it",
    )
