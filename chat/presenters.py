"""Wire shapes of a bot's messages, conversations, users and states: as the chat
interface and its live stream show them (always chat ids, never runtime ids),
and as the runtime API and event payloads show them (runtime ids)."""

from typing import Any

from bots.models import Conversation, Message, Participant, User
from chat.models import State
from chat.selectors.feedback import feedback_json
from events.models import Event
from platform_site.api.fields import format_timestamp


def user_chat_json(user: User) -> dict[str, Any]:
    body: dict[str, Any] = {"id": user.chat_id}
    if user.name:
        body["name"] = user.name
    if user.picture_url:
        body["pictureUrl"] = user.picture_url
    if user.profile:
        body["profile"] = user.profile
    if user.data is not None:
        body["data"] = user.data
    body["createdAt"] = format_timestamp(user.created_at)
    body["updatedAt"] = format_timestamp(user.updated_at)
    return body


def participant_chat_json(participant: Participant) -> dict[str, Any]:
    return user_chat_json(participant.user)


def conversation_chat_json(conversation: Conversation) -> dict[str, Any]:
    return {
        "id": conversation.chat_id,
        "createdAt": format_timestamp(conversation.created_at),
        "updatedAt": format_timestamp(conversation.updated_at),
    }


def message_chat_json(message: Message) -> dict[str, Any]:
    """A message as the chat interface shows it to a user, with the
    feedback that user gave on it when it was read with it
    (chat.selectors.feedback; the official webchat shows it)."""
    body: dict[str, Any] = {
        "id": message.id,
        "createdAt": format_timestamp(message.created_at),
        "payload": message.payload,
        "userId": message.user.chat_id,
        "conversationId": message.conversation.chat_id,
    }
    if message.metadata is not None:
        body["metadata"] = message.metadata
    feedback = feedback_json(message)
    if feedback is not None:
        body["feedback"] = feedback
    return body


def chat_event_json(
    event: Event, *, conversation: Conversation | None = None, user: User | None = None
) -> dict[str, Any]:
    """A custom event of a conversation's user: its own links, or the
    conversation and user it was sent in when it is not linked to them
    (the official webchat's bindConversation, bindUser)."""
    conversation = event.conversation or conversation
    user = event.user or user
    if conversation is None or user is None:
        raise ValueError(f"event {event.id} is not an event of a conversation's user")
    return {
        "id": event.id,
        "createdAt": format_timestamp(event.created_at),
        "payload": event.payload,
        "conversationId": conversation.chat_id,
        "userId": user.chat_id,
    }


# --- the live stream's `data` of each type ----------------------------------


def message_stream_json(message: Message) -> dict[str, Any]:
    """`message_created`: the message as the chat interface shows it, and
    whether the bot sent it."""
    return {**message_chat_json(message), "isBot": message.is_bot}


def message_deleted_stream_json(message: Message) -> dict[str, Any]:
    return {
        "id": message.id,
        "conversationId": message.conversation.chat_id,
        "userId": message.user.chat_id,
    }


def participant_stream_json(*, conversation: Conversation, user: User) -> dict[str, Any]:
    """`participant_removed`, as both official chat clients read it."""
    return {"conversationId": conversation.chat_id, "participantId": user.chat_id}


def participant_added_stream_json(*, conversation: Conversation, user: User) -> dict[str, Any]:
    """`participant_added`: @botpress/chat reads `participantId`, the
    official webchat the user itself as `participant`; each ignores the
    other's field."""
    return {
        **participant_stream_json(conversation=conversation, user=user),
        "participant": user_chat_json(user),
    }


def chat_event_stream_json(event: Event) -> dict[str, Any]:
    """`event_created`: events come from the chat interface, so from a user."""
    return {**chat_event_json(event), "isBot": False}


# --- the runtime API's and event payloads' shapes ---------------------------


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
    """`integration` is the name of the integration that made it, "" for the
    chat interface's and the bot's own (the hosted shape always has it)."""
    installation = conversation.integration
    body: dict[str, Any] = {
        "id": conversation.id,
        "createdAt": format_timestamp(conversation.created_at),
        "updatedAt": format_timestamp(conversation.updated_at),
        "channel": conversation.channel,
        "integration": "" if installation is None else installation.integration.name,
        "tags": conversation.tags,
    }
    if conversation.properties:
        body["properties"] = conversation.properties
    return body


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
    if user.properties:
        body["properties"] = user.properties
    if user.attributes:
        body["attributes"] = user.attributes
    return body


def participant_runtime_json(participant: Participant) -> dict[str, Any]:
    return user_runtime_json(participant.user)


def state_json(state: State) -> dict[str, Any]:
    """A state as the runtime API and its `state_expired` event show it:
    `conversationId` or `userId` for those types, the expiry when set."""
    body: dict[str, Any] = {
        "id": state.id,
        "createdAt": format_timestamp(state.created_at),
        "updatedAt": format_timestamp(state.updated_at),
        "botId": state.bot_id,
    }
    if state.conversation_id is not None:
        body["conversationId"] = state.conversation_id
    if state.user_id is not None:
        body["userId"] = state.user_id
    body["name"] = state.name
    body["type"] = state.type
    body["payload"] = state.payload
    if state.expiry is not None and state.expires_at is not None:
        body["expiry"] = state.expiry
        body["expiresAt"] = format_timestamp(state.expires_at)
    return body
