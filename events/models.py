from django.db import models

from bots.models import (
    Bot,
    Conversation,
    IntegrationInstallation,
    Message,
    User,
    Workflow,
)
from platform_site.foundation.ids import PrefixedIdField

FAILURE_REASON_MAX_LENGTH = 2000
RESPONSE_EXCERPT_MAX_LENGTH = 1000


class EventStatus(models.TextChoices):
    SCHEDULED = "scheduled"
    PENDING = "pending"
    PROCESSED = "processed"
    FAILED = "failed"
    IGNORED = "ignored"
    CANCELED = "canceled"


WAITING_STATUSES = (EventStatus.SCHEDULED, EventStatus.PENDING)
FINISHED_STATUSES = (
    EventStatus.PROCESSED,
    EventStatus.FAILED,
    EventStatus.IGNORED,
    EventStatus.CANCELED,
)


# Every index of the events table is written on each of an event's three
# writes (created, claimed, finished: no update can be HOT, as each changes an
# indexed column), so the table keeps only those its queries use. Foreign
# keys are indexed where set (most events link nothing), `bot` through
# event_list_idx, and no `varchar_pattern_ops` twin is kept (no LIKE on ids).
def _linked(field: str) -> models.Index:
    return models.Index(
        fields=[field],
        name=f"event_{field}_idx",
        condition=models.Q(**{f"{field}__isnull": False}),
    )


class Event(models.Model):
    id = PrefixedIdField(prefix="evt")
    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="events", db_index=False)
    type = models.CharField(max_length=200)
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=20, choices=EventStatus.choices)
    # null, not "": the contract sends `failureReason: null` until an event fails.
    failure_reason = models.CharField(  # noqa: DJ001
        max_length=FAILURE_REASON_MAX_LENGTH, null=True, blank=True
    )
    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,
    )
    user = models.ForeignKey(
        User, on_delete=models.SET_NULL, null=True, blank=True, related_name="+", db_index=False
    )
    message = models.ForeignKey(
        Message, on_delete=models.SET_NULL, null=True, blank=True, related_name="+", db_index=False
    )
    workflow = models.ForeignKey(
        Workflow, on_delete=models.SET_NULL, null=True, blank=True, related_name="+", db_index=False
    )
    integration = models.ForeignKey(
        IntegrationInstallation,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,
        help_text="The installed integration that created the event, if any.",
    )
    due_at = models.DateTimeField(help_text="When the event falls due (its schedule).")
    next_attempt_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text=(
            "When a worker next looks at the event: its due time, a retry's time, or "
            "the end of a worker's lease on it. Empty once the event is finished."
        ),
    )
    lease = models.BigIntegerField(
        default=0,
        help_text="Names the current claim on the event; a delivery holding another gives way.",
    )
    attempt_count = models.PositiveIntegerField(default=0)
    first_attempt_at = models.DateTimeField(
        null=True, blank=True, help_text="Start of the current retry window."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            # Lists are newest first; ids are ULIDs, so id order is creation order.
            models.Index(fields=["bot", "id"], name="event_list_idx"),
            # The list's filters on what every event has: without these a
            # filter matching few events scans all of the bot's (a second at
            # 300k events). The linked ids' filters use the indexes below.
            models.Index(fields=["bot", "type", "id"], name="event_by_type_idx"),
            models.Index(fields=["bot", "status", "id"], name="event_by_status_idx"),
            # What is due. Only waiting events have a next attempt, so the index
            # stays as small as the backlog; and `next_attempt_at <= $1` implies
            # the predicate even in a generic (prepared) plan, where a predicate
            # on status given as a parameter would not.
            models.Index(
                fields=["next_attempt_at"],
                name="event_next_attempt_idx",
                condition=models.Q(next_attempt_at__isnull=False),
            ),
            # What retention deletes: a bot's finished events by age.
            models.Index(
                fields=["bot", "updated_at"],
                name="event_expiry_idx",
                condition=models.Q(status__in=FINISHED_STATUSES),
            ),
            *(_linked(field) for field in ("conversation", "user", "message", "workflow")),
            _linked("integration"),
        ]
        constraints = [
            models.CheckConstraint(
                name="event_waiting_has_next_attempt",
                condition=(
                    models.Q(status__in=WAITING_STATUSES, next_attempt_at__isnull=False)
                    | (
                        ~models.Q(status__in=WAITING_STATUSES)
                        & models.Q(next_attempt_at__isnull=True)
                    )
                ),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.type} ({self.id})"


class AttemptOutcome(models.TextChoices):
    PROCESSED = "processed", "processed (2xx)"
    RETRY = "retry", "will be retried"
    FAILED = "failed", "failed"


class DeliveryAttempt(models.Model):
    """One POST of an event to its bot's webhook, successful or not."""

    # Both keys are indexed by the indexes below, which lead with them. No
    # constraint in the database: on PostgreSQL both tables are partitioned
    # by the event's id (events/services/partitions.py), and dropping a day
    # of events would first read every attempt to check the key. Attempts
    # go with their event: by Django's cascade, with the event's partition,
    # or by retention's delete (events/services/retention.py).
    event = models.ForeignKey(
        Event,
        on_delete=models.CASCADE,
        related_name="attempts",
        db_index=False,
        db_constraint=False,
    )
    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="+", db_index=False)
    number = models.PositiveIntegerField(help_text="1 for the first attempt at the event.")
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField()
    url = models.URLField(max_length=2000)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(
        max_length=500, blank=True, help_text="What went wrong when there was no response."
    )
    response_excerpt = models.CharField(max_length=RESPONSE_EXCERPT_MAX_LENGTH, blank=True)
    outcome = models.CharField(max_length=10, choices=AttemptOutcome.choices)

    class Meta:
        # Not unique: a delivery that outlived its lease and the one that took
        # over both happened, and both are recorded.
        indexes = [
            models.Index(fields=["event", "number"], name="attempt_by_event_idx"),
            models.Index(fields=["bot", "started_at"], name="attempt_by_bot_idx"),
            # The dashboard's rollup (events/rollups/) reads a minute's attempts
            # across all bots: by the index above, that is a probe per bot, and
            # with some thousands of bots PostgreSQL scans the whole table instead.
            models.Index(fields=["started_at"], name="attempt_started_idx"),
        ]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.event_id}"


# The dashboard's per-minute rollups live beside the service that writes them;
# importing them here registers them with the events app.
from events.rollups.models import AnalyticsMinute, BotFailureMinute, EventMinute  # noqa: E402, F401
