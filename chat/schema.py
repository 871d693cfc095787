"""How the chat interface appears in the OpenAPI document: the user key
schemes, chat ids, the body of a bot's message and the live stream (loaded by
ChatConfig.ready)."""

from typing import Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import Direction, OpenApiParameter

from bots.message_payloads import PAYLOAD_TYPES, MessagePayloadField
from bots.schema import typeless_payload_schema
from chat.event_types import (
    EVENT_CREATED,
    MESSAGE_CREATED,
    MESSAGE_DELETED,
    PARTICIPANT_ADDED,
    PARTICIPANT_REMOVED,
)
from chat.keys import CHAT_ID_MAX_LENGTH
from platform_site.api.schema import closed_schema, error_response


class UserKeyScheme(OpenApiAuthenticationExtension):
    target_class = "chat.authentication.UserKeyAuthentication"
    name = "userKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "x-user-key",
            "description": "HS256 JWT {id: <userId>} signed with the chat connection's key",
        }


class SignedUserKeyScheme(OpenApiAuthenticationExtension):
    target_class = "chat.authentication.SignedUserKeyAuthentication"
    name = "signedUserKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "x-user-key",
            "description": (
                "The same key as userKey, whose user may not exist yet: it is made on first use"
            ),
        }


CHAT_ID_SCHEMA = {
    "type": "string",
    "pattern": f"^[A-Za-z0-9_/-]{{1,{CHAT_ID_MAX_LENGTH}}}$",
}
WEBHOOK_ID_SCHEMA = {"type": "string", "pattern": r"^[^/\x00]{1,64}$"}
# The chat interface's path variables that are not ids of the kind their name
# says (ChatView.path_parameters); message and event ids are runtime ids.
CHAT_PATH_PARAMETERS = [
    OpenApiParameter(
        "webhook_id",
        WEBHOOK_ID_SCHEMA,
        OpenApiParameter.PATH,
        description="The chat connection's webhook id; an unknown one is 404",
    ),
    OpenApiParameter(
        "conversation_id",
        CHAT_ID_SCHEMA,
        OpenApiParameter.PATH,
        description="The conversation's chat id (chosen by its creator, or its conv_… id)",
    ),
    OpenApiParameter(
        "user_id",
        CHAT_ID_SCHEMA,
        OpenApiParameter.PATH,
        description="The user's chat id (chosen by the user, or their user_… id)",
    ),
]


class BotMessageCreateScheme(OpenApiSerializerExtension):
    """The body of POST /v1/chat/messages (and of its get-or-create): the
    payload's type is given beside it (`type`), inside it (`payload.type`), or
    both when they agree."""

    target_class = "chat.runtime.serializers.BotMessageCreateSerializer"
    match_subclasses = True
    priority = 1  # before ClosedSerializerScheme, whose work it includes

    def map_serializer(self, auto_schema: AutoSchema, direction: Direction) -> dict[str, Any]:
        schema = closed_schema(
            self.target,
            auto_schema._map_serializer(self.target, direction, bypass_extensions=True),
        )
        payload_ref = auto_schema._map_serializer_field(MessagePayloadField(), direction)
        schema["properties"]["payload"] = {
            "type": "object",
            "description": "A message payload; its `type` may be left out when `type` gives it",
        }
        variants: list[dict[str, Any]] = [
            {
                "required": ["type"],
                "properties": {
                    "type": {"const": kind},
                    "payload": typeless_payload_schema(
                        auto_schema, direction, kind, type_schema={"const": kind}
                    ),
                },
            }
            for kind in PAYLOAD_TYPES
        ]
        variants.append({"not": {"required": ["type"]}, "properties": {"payload": payload_ref}})
        schema["oneOf"] = variants
        return schema


def _live_event_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["type", "data"],
        "properties": {
            "type": {
                "enum": [
                    "ping",
                    MESSAGE_CREATED,
                    MESSAGE_DELETED,
                    PARTICIPANT_ADDED,
                    PARTICIPANT_REMOVED,
                    EVENT_CREATED,
                ]
            },
            "data": {"type": "object"},
        },
    }


def add_live_stream(result: dict[str, Any], generator: Any, **kwargs: Any) -> dict[str, Any]:
    """GET {chat}/{webhookId}/conversations/{id}/listen: an async Django view
    (chat.live.views), not a DRF one, so drf-spectacular does not see it
    (a POSTPROCESSING_HOOKS entry)."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["LiveEvent"] = _live_event_schema()
    error_body = {"$ref": "#/components/schemas/ErrorBody"}
    parameters = [
        {
            "in": "path",
            "name": name,
            "required": True,
            "description": description,
            "schema": dict(schema),
        }
        for name, schema, description in (
            ("webhook_id", WEBHOOK_ID_SCHEMA, "The chat connection's webhook id"),
            ("conversation_id", CHAT_ID_SCHEMA, "The conversation's chat id"),
        )
    ]
    heartbeat = int(settings.LIVE_STREAM_HEARTBEAT)
    result["paths"]["/chat/{webhook_id}/conversations/{conversation_id}/listen"] = {
        "get": {
            "operationId": "chatListenConversation",
            "summary": "Listen to a conversation the key's user takes part in",
            "description": (
                "Server-sent events, each an unnamed message (no `event:` line) whose `data:`"
                " is one JSON object `{type, data}` (LiveEvent). A ping comes first, then one"
                f" at least every {heartbeat} s of silence. The stream ends after the"
                " listener's own removal from the conversation. The schema of the response"
                " describes one event, as a reader of the stream sees it."
            ),
            "tags": ["chat"],
            "security": [{"userKey": []}],
            "parameters": parameters,
            "responses": {
                "200": {
                    "description": "The live stream",
                    "content": {
                        "text/event-stream": {
                            "schema": {
                                "type": "object",
                                "required": ["data", "event"],
                                "properties": {
                                    "event": {"const": "message"},
                                    "data": {
                                        "type": "string",
                                        "contentMediaType": "application/json",
                                        "contentSchema": {"$ref": "#/components/schemas/LiveEvent"},
                                    },
                                },
                            }
                        }
                    },
                },
                **{
                    str(status): error_response(status, error_body)
                    for status in (400, 401, 403, 404, 503)
                },
            },
        }
    }
    return result
