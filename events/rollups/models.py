"""The rollups' tables. Rows exist only for minutes where something
happened: a quiet workspace costs nothing."""

from django.db import models

from bots.models import Bot, Workspace

FAILURE_REASON_MAX_LENGTH = 300


def _bucket() -> models.PositiveIntegerField:
    return models.PositiveIntegerField(default=0)


class EventMinute(models.Model):
    """One workspace's minute (UTC): events created, delivery attempts that
    succeeded and that failed, and the lateness of first attempts in the
    buckets of events/rollups/lateness.py (columns, not a JSON list, so that
    a page sums a day of them in SQL and reads back 1,440 rows at most)."""

    minute = models.DateTimeField()
    # Indexed by the unique constraint, which leads with it.
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    created = models.PositiveIntegerField(default=0)
    delivered = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    late_50ms = _bucket()
    late_100ms = _bucket()
    late_250ms = _bucket()
    late_500ms = _bucket()
    late_1s = _bucket()
    late_2_5s = _bucket()
    late_5s = _bucket()
    late_10s = _bucket()
    late_30s = _bucket()
    late_1min = _bucket()
    late_5min = _bucket()
    late_over_5min = _bucket()

    class Meta:
        constraints = [
            # A staff account's page reads its workspaces' minutes by this.
            models.UniqueConstraint(fields=["workspace", "minute"], name="event_minute_unique"),
        ]
        # A superuser's page reads every workspace's last day; the purge, old minutes.
        indexes = [models.Index(fields=["minute"], name="event_minute_idx")]

    def __str__(self) -> str:
        return f"{self.workspace_id} at {self.minute:%Y-%m-%d %H:%M}"


class BotFailureMinute(models.Model):
    """A bot's failed delivery attempts in one minute (UTC), and the last one's
    reason; only minutes with a failure have a row."""

    minute = models.DateTimeField()
    # Indexed by the unique constraint, which leads with it.
    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="+", db_index=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    failed = models.PositiveIntegerField()
    last_failure_reason = models.CharField(max_length=FAILURE_REASON_MAX_LENGTH)
    last_failure_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["bot", "minute"], name="bot_failure_minute_unique"),
        ]
        indexes = [models.Index(fields=["minute"], name="bot_failure_minute_idx")]

    def __str__(self) -> str:
        return f"{self.bot_id} at {self.minute:%Y-%m-%d %H:%M}"


ANALYTICS_NAME_MAX_LENGTH = 200


class AnalyticsMinute(models.Model):
    """What a bot counted with trackAnalytics under one name in one minute
    (UTC): calls add to the row of their minute (events/services/analytics.py),
    so a busy name costs a row a minute, not a row a call."""

    minute = models.DateTimeField()
    # Indexed by the unique constraint, which leads with it.
    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="+", db_index=False)
    # The dashboard reads a staff account's workspaces by it.
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=ANALYTICS_NAME_MAX_LENGTH)
    count = models.PositiveBigIntegerField()

    class Meta:
        constraints = [
            # What a call's upsert meets.
            models.UniqueConstraint(
                fields=["bot", "name", "minute"], name="analytics_minute_unique"
            ),
        ]
        indexes = [models.Index(fields=["minute"], name="analytics_minute_idx")]

    def __str__(self) -> str:
        return f"{self.bot_id} {self.name} at {self.minute:%Y-%m-%d %H:%M}"
