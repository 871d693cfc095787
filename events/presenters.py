import json
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


def delivery_body(
    *,
    event_id: str,
    type: str,
    bot_id: str,
    created_at: str,
    payload: Any,
    conversation_id: str | None,
    user_id: str | None,
    message_id: str | None,
    workflow_id: str | None,
) -> str:
    """The body POSTed to the bot's webhook: the event with its bot and the
    links that are set, as compact UTF-8 JSON (`created_at` already formatted)."""
    body: dict[str, Any] = {
        "id": event_id,
        "type": type,
        "botId": bot_id,
        "createdAt": created_at,
        "payload": payload,
    }
    for name, value in (
        ("conversationId", conversation_id),
        ("userId", user_id),
        ("messageId", message_id),
        ("workflowId", workflow_id),
    ):
        if value is not None:
            body[name] = value
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def sdk_delivery_body(
    *,
    event_id: str,
    type: str,
    created_at: str,
    payload: Any,
    conversation_id: str | None,
    user_id: str | None,
    message_id: str | None,
) -> str:
    """The body POSTed to a bot in `botpress` format: `{"event": …}`, the
    event as the runtime API shows it while it is being delivered."""
    event: dict[str, Any] = {
        "id": event_id,
        "createdAt": created_at,
        "type": type,
        "payload": payload,
        "status": "pending",
        "failureReason": None,
    }
    for name, value in (
        ("conversationId", conversation_id),
        ("userId", user_id),
        ("messageId", message_id),
    ):
        if value is not None:
            event[name] = value
    return json.dumps({"event": event}, separators=(",", ":"), ensure_ascii=False)


def _links(event: Event) -> dict[str, str]:
    """The ids an event is linked to, those that are set."""
    linked = {
        "conversationId": event.conversation_id,
        "userId": event.user_id,
        "messageId": event.message_id,
    }
    return {name: value for name, value in linked.items() if value is not None}
