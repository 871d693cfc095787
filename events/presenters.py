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
    for name, value in (
        ("conversationId", event.conversation_id),
        ("userId", event.user_id),
        ("messageId", event.message_id),
    ):
        if value is not None:
            body[name] = value
    return body


def delivery_json(event: Event) -> dict[str, Any]:
    """The body POSTed to the bot's webhook: the event with its bot and links."""
    body: dict[str, Any] = {
        "id": event.id,
        "type": event.type,
        "botId": event.bot_id,
        "createdAt": format_timestamp(event.created_at),
        "payload": event.payload,
    }
    for name, value in (
        ("conversationId", event.conversation_id),
        ("userId", event.user_id),
        ("messageId", event.message_id),
        ("workflowId", event.workflow_id),
    ):
        if value is not None:
            body[name] = value
    return body
