"""The settings record of a workspace: read by the engine, changed by staff."""

from typing import Any

from django.db import transaction

from bots.actors import PLATFORM, Actor
from bots.models import AuditAction, WorkspaceSettings
from bots.services.audit_records import audit_record_add, changed_fields
from platform_site.foundation.credential_invalidation import credentials_changed

SETTINGS_FIELDS = (
    "display_name",
    "event_retention_days",
    "webhook_timeout_seconds",
    "rate_limit_per_minute",
    "chat_user_rate_limit_per_minute",
    "chat_address_rate_limit_per_minute",
    "chat_address_user_creation_rate_limit_per_minute",
    "chat_user_creation_rate_limit_per_hour",
)
# What requests read from the settings through platform_site/api/rate_limit_policies.py.
_RATE_LIMIT_FIELDS = {name for name in SETTINGS_FIELDS if "rate_limit_per_" in name}


def settings_fields(record: WorkspaceSettings) -> dict[str, Any]:
    return {name: getattr(record, name) for name in SETTINGS_FIELDS}


@transaction.atomic
def workspace_settings_update(
    *, record: WorkspaceSettings, before: dict[str, Any] | None = None, actor: Actor = PLATFORM
) -> WorkspaceSettings:
    """Save `record`, whose fields the caller changed (a form did, say);
    `before` is what they were, read from the database when not given."""
    if before is None:
        stored = WorkspaceSettings.objects.filter(pk=record.pk).first()
        before = settings_fields(stored) if stored else {}
    changes = changed_fields(before, settings_fields(record))
    record.full_clean()
    record.save()
    if _RATE_LIMIT_FIELDS.intersection(changes):
        credentials_changed()
    if changes:
        audit_record_add(
            actor,
            action=AuditAction.SETTINGS_CHANGED,
            target_type="workspace_settings",
            target_id=record.workspace_id,
            workspace=record.workspace,
            changes=changes,
        )
    return record
