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


def delivery_json(event: Event) -> dict[str, Any]:
    """The body POSTed to the bot's webhook: the event with its bot and links."""
    body: dict[str, Any] = {
        "id": event.id,
        "type": event.type,
        "botId": event.bot_id,
        "createdAt": format_timestamp(event.created_at),
        "payload": event.payload,
    }
    links = _links(event)
    if event.workflow_id is not None:
        links["workflowId"] = event.workflow_id
    return body | links


def _links(event: Event) -> dict[str, str]:
    """The ids an event is linked to, those that are set."""
    linked = {
        "conversationId": event.conversation_id,
        "userId": event.user_id,
        "messageId": event.message_id,
    }
    return {name: value for name, value in linked.items() if value is not None}
