"""The JSON of the admin API's objects."""

from typing import Any

from adminapi.bot_logs import LOG_LEVELS
from bots.models import AuditRecord, Bot, Membership
from events.models import AttemptOutcome, DeliveryAttempt
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
        body["webhookUrl"] = bot.webhook_url
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
    account = membership.account
    body: dict[str, Any] = {
        "id": membership.id,
        "userId": str(account.pk),
        "email": account.email,
        "role": membership.role,
        "createdAt": format_timestamp(membership.created_at),
        "updatedAt": format_timestamp(membership.updated_at),
    }
    display_name = account.get_full_name()
    if display_name:
        body["displayName"] = display_name
    return body


def audit_record_json(record: AuditRecord) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": record.id,
        "createdAt": format_timestamp(record.created_at),
        "workspaceId": record.workspace_id,
        "action": record.action,
        "actorEmail": record.actor_label,
        "targetType": record.target_type,
        "targetId": record.target_id,
        "changes": record.changes,
    }
    if record.actor_id is not None:
        body["actorId"] = str(record.actor_id)
    if record.client_ip:
        body["clientIp"] = record.client_ip
    return body


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
