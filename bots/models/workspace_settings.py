from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from .workspace import Workspace

EVENT_RETENTION_DAYS_DEFAULT = 30
EVENT_RETENTION_DAYS_MAX = 3650
WEBHOOK_TIMEOUT_SECONDS_MAX = 60.0


def default_webhook_timeout() -> float:
    # The deployment's default, for workspaces nobody tuned.
    return float(settings.EVENT_DELIVERY_TIMEOUT)


# The deployment's rate limits for a workspace nobody tuned.
def default_rate_limit() -> int:
    return int(settings.WORKSPACE_RATE_LIMIT_PER_MINUTE)


def default_chat_user_rate_limit() -> int:
    return int(settings.CHAT_USER_RATE_LIMIT_PER_MINUTE)


def default_chat_address_rate_limit() -> int:
    return int(settings.CHAT_ADDRESS_RATE_LIMIT_PER_MINUTE)


def default_chat_address_user_creation_rate_limit() -> int:
    return int(settings.CHAT_ADDRESS_USER_CREATION_RATE_LIMIT_PER_MINUTE)


def default_chat_user_creation_rate_limit() -> int:
    return int(settings.CHAT_USER_CREATION_RATE_LIMIT_PER_HOUR)


class WorkspaceSettings(models.Model):
    """What staff tune per workspace. Every workspace has one (made with it)."""

    workspace = models.OneToOneField(
        Workspace, on_delete=models.CASCADE, primary_key=True, related_name="settings"
    )
    display_name = models.CharField(
        max_length=200, blank=True, help_text="Shown to people instead of the workspace's name."
    )
    event_retention_days = models.PositiveIntegerField(
        default=EVENT_RETENTION_DAYS_DEFAULT,
        validators=[MinValueValidator(1), MaxValueValidator(EVENT_RETENTION_DAYS_MAX)],
        help_text="Processed, failed, ignored and canceled events older than this are deleted.",
    )
    webhook_timeout_seconds = models.FloatField(
        default=default_webhook_timeout,
        validators=[MinValueValidator(0.5), MaxValueValidator(WEBHOOK_TIMEOUT_SECONDS_MAX)],
        help_text="How long a delivery to a bot of this workspace waits for its answer.",
    )
    rate_limit_per_minute = models.PositiveIntegerField(
        default=default_rate_limit,
        validators=[MinValueValidator(1)],
        help_text="Requests a minute the workspace's tokens may make, together.",
    )
    chat_user_rate_limit_per_minute = models.PositiveIntegerField(
        default=default_chat_user_rate_limit,
        validators=[MinValueValidator(1)],
        help_text="Requests a minute one chat user of the workspace's bots may make.",
    )
    chat_address_rate_limit_per_minute = models.PositiveIntegerField(
        default=default_chat_address_rate_limit,
        validators=[MinValueValidator(1)],
        help_text=(
            "Requests a minute one client address may make to the chat interface of "
            "the workspace's bots (users it creates and their requests included)."
        ),
    )
    chat_address_user_creation_rate_limit_per_minute = models.PositiveIntegerField(
        default=default_chat_address_user_creation_rate_limit,
        validators=[MinValueValidator(1)],
        help_text=(
            "Chat users one client address may have made a minute through the chat "
            "interface of the workspace's bots (on top of its requests' limit)."
        ),
    )
    chat_user_creation_rate_limit_per_hour = models.PositiveIntegerField(
        default=default_chat_user_creation_rate_limit,
        validators=[MinValueValidator(1)],
        help_text=(
            "Chat users each bot of the workspace may have made an hour through its chat "
            "interface, whatever the address: POST users, the webchat's initialize without "
            "a key, users/get-or-create of a new user."
        ),
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "workspace settings"

    def __str__(self) -> str:
        return f"settings of {self.workspace_id}"
