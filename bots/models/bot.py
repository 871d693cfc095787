import base64
import json
import secrets

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, URLValidator
from django.db import models

from platform_site.foundation.ids import PrefixedIdField
from platform_site.foundation.secret_fields import EncryptedCharField

from .workspace import Workspace


def new_signing_secret() -> str:
    """A Standard Webhooks secret: `whsec_` and base64 of 32 random bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


# Its base64 (4/3 of it) must fit in a header beside the others: Node's
# HTTP server, which SDK bots run on, takes 16 KiB of headers in all.
BOT_CONFIGURATION_MAX_BYTES = 8 * 1024


def validate_configuration(value: object) -> None:
    if not isinstance(value, dict):
        raise ValidationError("An object is expected.")
    encoded = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    if len(encoded) > BOT_CONFIGURATION_MAX_BYTES:
        raise ValidationError(
            f"At most {BOT_CONFIGURATION_MAX_BYTES} bytes of JSON: it is sent base64-encoded "
            "in a header (x-bp-configuration) with every delivery."
        )


# A bot written with the official SDK answers a delivery once its handlers
# ran, LLM calls included: it may ask for up to five minutes.
MAX_EXECUTION_TIME_MAX = 300


class DeliveryFormat(models.TextChoices):
    """How an event is POSTed to the bot's webhook (docs/api/webhooks.md)."""

    # The event itself, signed in the Standard Webhooks format.
    STANDARD = "standard"
    # What the official SDK's bot server reads: x-bot-id, x-bp-* headers and
    # {"event": …}, signed the same way.
    BOTPRESS = "botpress"


class Bot(models.Model):
    id = PrefixedIdField(prefix="bot")
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="bots")
    name = models.CharField(max_length=200)
    tags = models.JSONField(default=dict, blank=True)
    dev = models.BooleanField(default=False)
    deployed_at = models.DateTimeField(null=True, blank=True)
    webhook_url = models.URLField(
        max_length=2000,
        blank=True,
        validators=[URLValidator(schemes=["http", "https"])],
        help_text="Where events are delivered (http or https).",
    )
    delivery_format = models.CharField(
        max_length=20,
        choices=DeliveryFormat.choices,
        default=DeliveryFormat.STANDARD,
        help_text=(
            "standard: the event, signed (Standard Webhooks). botpress: the request a bot "
            'written with the official SDK reads (x-bp-* headers, {"event": …}), signed too.'
        ),
    )
    max_execution_time = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_EXECUTION_TIME_MAX)],
        help_text=(
            "Seconds a delivery waits for the bot's answer (1 to 300); empty: the "
            "workspace's webhook timeout."
        ),
    )
    # Sent to an SDK bot with every delivery (x-bp-configuration), read as ctx.configuration.
    configuration = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_configuration],
        help_text=(
            "Sent to the bot with every delivery in botpress format, where the SDK hands "
            "it to handlers as ctx.configuration. Not a place for secrets."
        ),
    )
    # Encrypted at rest: whoever holds it can sign events as the platform.
    signing_secret = EncryptedCharField(max_length=100, default=new_signing_secret, editable=False)
    # After a rotation, deliveries carry a signature with the old secret too
    # until this moment, so a bot can switch secrets without refusing any.
    previous_signing_secret = EncryptedCharField(max_length=100, blank=True, editable=False)
    previous_signing_secret_expires_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            # The admin list: by creation (ids are ULIDs) or by update, per workspace.
            models.Index(fields=["workspace", "id"], name="bot_by_created_idx"),
            models.Index(fields=["workspace", "updated_at", "id"], name="bot_by_updated_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"


class Integration(models.Model):
    id = PrefixedIdField(prefix="intg")
    name = models.CharField(max_length=200)
    version = models.CharField(max_length=50, default="0.1.0")
    title = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["name", "version"], name="integration_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.name}@{self.version}"


class IntegrationInstallation(models.Model):
    """An integration installed on a bot, under an alias unique to that bot."""

    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="installations")
    integration = models.ForeignKey(
        Integration, on_delete=models.PROTECT, related_name="installations"
    )
    alias = models.CharField(max_length=200)
    enabled = models.BooleanField(default=True)
    configuration = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["bot", "alias"], name="installation_alias_unique"),
        ]
        indexes = [models.Index(fields=["bot", "integration"], name="installation_lookup_idx")]

    def __str__(self) -> str:
        return f"{self.alias} on {self.bot_id}"


class Workflow(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        IN_PROGRESS = "in_progress"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    id = PrefixedIdField(prefix="wf")
    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="workflows")
    name = models.CharField(max_length=200)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    conversation = models.ForeignKey(
        "bots.Conversation", on_delete=models.SET_NULL, null=True, blank=True
    )
    user = models.ForeignKey("bots.User", on_delete=models.SET_NULL, null=True, blank=True)
    input = models.JSONField(default=dict, blank=True)
    output = models.JSONField(default=dict, blank=True)
    tags = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["bot", "id"], name="workflow_list_idx")]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"
