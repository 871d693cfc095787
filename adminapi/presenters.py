"""The JSON of the admin API's objects."""

import json
from typing import Any

from bots.models import AuditRecord, Bot, Membership
from bots.selectors.audit_records import HOSTED_AUDIT_ACTIONS
from events.models import AttemptOutcome, DeliveryAttempt
from events.selectors.attempts import LOG_LEVELS
from platform_site.api.fields import format_timestamp


def bot_summary_json(bot: Bot) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": bot.id,
        "createdAt": format_timestamp(bot.created_at),
        "updatedAt": format_timestamp(bot.updated_at),
        "name": bot.name,
        "tags": bot.tags,
    }
    if bot.deployed_at is not None:
        body["deployedAt"] = format_timestamp(bot.deployed_at)
    return body


def bot_json(bot: Bot) -> dict[str, Any]:
    body = bot_summary_json(bot)
    body["dev"] = bot.dev
    if bot.webhook_url:
        # `url` as the hosted API's requests name it; `webhookUrl` for this
        # service's earlier callers.
        body["url"] = body["webhookUrl"] = bot.webhook_url
    body["deliveryFormat"] = bot.delivery_format
    if bot.max_execution_time is not None:
        body["maxExecutionTime"] = bot.max_execution_time
    # The hosted API's shape; no schema is kept here.
    body["configuration"] = {"data": bot.configuration, "schema": {}}
    body["integrations"] = {
        installation.alias: {
            "id": installation.integration.id,
            "name": installation.integration.name,
            "version": installation.integration.version,
            "enabled": installation.enabled,
        }
        for installation in bot.installations.all()
    }
    return body


def member_json(membership: Membership) -> dict[str, Any]:
    """The hosted API's workspace member, exactly: it has no `updatedAt`, and
    no `profilePicture`, as accounts here have none."""
    account = membership.account
    body: dict[str, Any] = {
        "id": membership.id,
        "userId": str(account.pk),
        "email": account.email,
        "role": membership.role,
        "createdAt": format_timestamp(membership.created_at),
    }
    display_name = account.get_full_name()
    if display_name:
        body["displayName"] = display_name
    return body


def audit_record_json(record: AuditRecord) -> dict[str, Any]:
    """The hosted API's audit record: `value` is what changed, as a JSON object
    in a string, and the client's address is not shown."""
    body: dict[str, Any] = {
        "id": record.id,
        "recordedAt": format_timestamp(record.created_at),
        "userId": None if record.actor_id is None else str(record.actor_id),
        "resourceId": record.target_id or None,
        "action": HOSTED_AUDIT_ACTIONS.get(record.action, "UNKNOWN"),
    }
    if record.actor_label:
        body["userEmail"] = record.actor_label
    name = _resource_name(record)
    if name is not None:
        body["resourceName"] = name
    if record.changes:
        body["value"] = json.dumps(record.changes, ensure_ascii=False, sort_keys=True)
    return body


def _resource_name(record: AuditRecord) -> str | None:
    """The bot's name (its new one, when renamed) or the member's account, as
    the record kept it."""
    changes = record.changes if isinstance(record.changes, dict) else {}
    key = {"member": "account", "bot": "name"}.get(record.target_type)
    name = changes.get(key) if key else None
    if isinstance(name, dict):
        name = name.get("to")
    return name if isinstance(name, str) and name else None


_LEVELS = {outcome: level for level, outcome in LOG_LEVELS.items()}


def _what_happened(attempt: DeliveryAttempt) -> str:
    if attempt.status_code is not None:
        return f"HTTP {attempt.status_code}"
    return attempt.error or "no response"


def _log_message(attempt: DeliveryAttempt) -> str:
    event, number, what = attempt.event_id, attempt.number, _what_happened(attempt)
    if attempt.outcome == AttemptOutcome.PROCESSED:
        return f"Delivered {event} (attempt {number}): {what} in {attempt.duration_ms} ms"
    if attempt.outcome == AttemptOutcome.RETRY:
        return f"Attempt {number} at {event} failed, will retry: {what}"
    attempts = "attempt" if number == 1 else "attempts"
    return f"{event} failed after {number} {attempts}: {what}"


def bot_log_json(attempt: DeliveryAttempt) -> dict[str, Any]:
    body: dict[str, Any] = {
        "timestamp": format_timestamp(attempt.started_at),
        "level": _LEVELS[AttemptOutcome(attempt.outcome)],
        "message": _log_message(attempt),
        "eventId": attempt.event_id,
        "attempt": attempt.number,
        "durationMs": attempt.duration_ms,
        "url": attempt.url,
    }
    if attempt.status_code is not None:
        body["statusCode"] = attempt.status_code
    return body
