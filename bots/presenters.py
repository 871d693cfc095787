"""Wire shapes of a bot's messages, conversations and users as the runtime API
and event payloads show them (runtime ids)."""

from typing import Any

from bots.models import Conversation, Message, User
from platform_site.api.fields import format_timestamp


def message_runtime_json(message: Message) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": message.id,
        "createdAt": format_timestamp(message.created_at),
        "updatedAt": format_timestamp(message.updated_at),
        "type": message.type,
        "payload": message.payload,
        "direction": "outgoing" if message.is_bot else "incoming",
        "userId": message.user_id,
        "conversationId": message.conversation_id,
        "tags": message.tags,
    }
    if message.origin:
        body["origin"] = message.origin
    return body


def conversation_runtime_json(conversation: Conversation) -> dict[str, Any]:
    return {
        "id": conversation.id,
        "createdAt": format_timestamp(conversation.created_at),
        "updatedAt": format_timestamp(conversation.updated_at),
        "tags": conversation.tags,
    }


def user_runtime_json(user: User) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": user.id,
        "createdAt": format_timestamp(user.created_at),
        "updatedAt": format_timestamp(user.updated_at),
        "tags": user.tags,
    }
    if user.name:
        body["name"] = user.name
    if user.picture_url:
        body["pictureUrl"] = user.picture_url
    return body
