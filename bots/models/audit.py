from typing import Any

from django.conf import settings
from django.db import models

from platform_site.foundation.ids import PrefixedIdField

from .workspace import Workspace


class AuditAction(models.TextChoices):
    MEMBER_ADDED = "member.added", "member added"
    MEMBER_ROLE_CHANGED = "member.role_changed", "member's role changed"
    MEMBER_REMOVED = "member.removed", "member removed"
    TOKEN_CREATED = "token.created", "token created"
    TOKEN_REVOKED = "token.revoked", "token revoked"
    TOKEN_RATE_LIMIT_CHANGED = "token.rate_limit_changed", "token rate limit changed"
    BOT_CREATED = "bot.created", "bot created"
    BOT_UPDATED = "bot.updated", "bot updated"
    BOT_DELETED = "bot.deleted", "bot deleted"
    BOT_SECRET_ROTATED = "bot.secret_rotated", "bot's signing secret rotated"
    SETTINGS_CHANGED = "settings.changed", "workspace settings changed"


class AppendOnlyError(Exception):
    """Audit records are written once and never changed or deleted."""


class AuditRecordQuerySet(models.QuerySet["AuditRecord"]):
    def update(self, **kwargs: Any) -> int:
        raise AppendOnlyError("audit records are append-only")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError("audit records are append-only")


class AuditRecord(models.Model):
    """One change that matters, as the service that made it saw it.

    The workspace and actor are kept without a foreign-key constraint (and
    with a copy of the actor's name): the record outlives both."""

    id = PrefixedIdField(prefix="audit")
    workspace = models.ForeignKey(
        Workspace,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        null=True,
        blank=True,
        related_name="audit_records",
        help_text="Empty for changes of an account's own (its tokens).",
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        null=True,
        blank=True,
        related_name="+",
        help_text="Empty when the platform itself made the change (a command).",
    )
    actor_label = models.CharField(max_length=254, blank=True)
    action = models.CharField(max_length=40, choices=AuditAction.choices)
    target_type = models.CharField(max_length=40)
    target_id = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True, db_index=False)
    client_ip = models.GenericIPAddressField(null=True, blank=True)
    changes = models.JSONField(default=dict, blank=True)

    objects = AuditRecordQuerySet.as_manager()

    class Meta:
        indexes = [
            # Newest first per workspace (ids are ULIDs: id order is time order).
            models.Index(fields=["workspace", "id"], name="audit_by_workspace_idx"),
            models.Index(fields=["actor", "id"], name="audit_by_actor_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.target_type} {self.target_id}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnlyError("audit records are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError("audit records are append-only")
