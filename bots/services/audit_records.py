"""Audit records, written by the services that make the changes (never by
signals): who did what to which object, from where, and what changed."""

from typing import Any

from bots.actors import Actor
from bots.models import AuditAction, AuditRecord, Workspace


def audit_record_add(
    actor: Actor,
    *,
    action: AuditAction,
    target_type: str,
    target_id: object,
    workspace: Workspace | None,
    changes: dict[str, Any] | None = None,
) -> AuditRecord:
    """Append one record; call it inside the transaction of the change, so
    that the record exists exactly when the change does."""
    return AuditRecord.objects.create(
        workspace=workspace,
        actor=actor.account,
        actor_label=actor.label,
        action=action,
        target_type=target_type,
        target_id=str(target_id),
        client_ip=actor.client_ip,
        changes=changes or {},
    )


def changed_fields(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """{field: {"from": old, "to": new}} for the fields whose value changed."""
    return {
        name: {"from": before.get(name), "to": value}
        for name, value in after.items()
        if before.get(name) != value
    }
