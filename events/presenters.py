from collections.abc import Mapping
from typing import Any

from events.models import Event
from platform_site.api.fields import format_timestamp


def event_json(event: Event) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": event.id,
        "createdAt": format_timestamp(event.created_at),
        "type": event.type,
        "payload": event.payload,
        "status": event.status,
        "failureReason": event.failure_reason,
    }
    return body | _links(event)


def delivery_json(row: Mapping[str, Any]) -> dict[str, Any]:
    """The body POSTed to the bot's webhook: the event with its bot and links,
    from the event's columns (as `values()` reads them)."""
    body: dict[str, Any] = {
        "id": row["id"],
        "type": row["type"],
        "botId": row["bot_id"],
        "createdAt": format_timestamp(row["created_at"]),
        "payload": row["payload"],
    }
    for name, column in _DELIVERY_LINKS:
        if row[column] is not None:
            body[name] = row[column]
    return body


_DELIVERY_LINKS = (
    ("conversationId", "conversation_id"),
    ("userId", "user_id"),
    ("messageId", "message_id"),
    ("workflowId", "workflow_id"),
)


def _links(event: Event) -> dict[str, str]:
    """The ids an event is linked to, those that are set."""
    linked = {
        "conversationId": event.conversation_id,
        "userId": event.user_id,
        "messageId": event.message_id,
    }
    return {name: value for name, value in linked.items() if value is not None}
