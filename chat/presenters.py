"""Wire shapes of the chat interface: always chat ids, never runtime ids."""

from typing import Any

from bots.models import Message
from platform_site.api.fields import format_timestamp


def message_chat_json(message: Message) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": message.id,
        "createdAt": format_timestamp(message.created_at),
        "payload": message.payload,
        "userId": message.user.chat_id,
        "conversationId": message.conversation.chat_id,
    }
    if message.metadata is not None:
        body["metadata"] = message.metadata
    return body
