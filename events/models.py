from django.db import models

from bots.models import (
    Bot,
    Conversation,
    IntegrationInstallation,
    Message,
    User,
    Workflow,
)
from platform_site.api.ids import PrefixedIdField

FAILURE_REASON_MAX_LENGTH = 2000


class EventStatus(models.TextChoices):
    SCHEDULED = "scheduled"
    PENDING = "pending"
    PROCESSED = "processed"
    FAILED = "failed"
    IGNORED = "ignored"
    CANCELED = "canceled"


class Event(models.Model):
    id = PrefixedIdField(prefix="evt")
    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="events")
    type = models.CharField(max_length=200)
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=20, choices=EventStatus.choices)
    # null, not "": the contract sends `failureReason: null` until an event fails.
    failure_reason = models.CharField(  # noqa: DJ001
        max_length=FAILURE_REASON_MAX_LENGTH, null=True, blank=True
    )
    conversation = models.ForeignKey(
        Conversation, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    user = models.ForeignKey(
        User, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    message = models.ForeignKey(
        Message, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    workflow = models.ForeignKey(
        Workflow, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    integration = models.ForeignKey(
        IntegrationInstallation,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The installed integration that created the event, if any.",
    )
    due_at = models.DateTimeField(help_text="When the event is due for delivery.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            # Lists are newest first; ids are ULIDs, so id order is creation order.
            models.Index(fields=["bot", "id"], name="event_list_idx"),
            # What is due: only rows still waiting are in it, so it stays small.
            models.Index(
                fields=["due_at"],
                name="event_due_idx",
                condition=models.Q(status__in=["scheduled", "pending"]),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.type} ({self.id})"
