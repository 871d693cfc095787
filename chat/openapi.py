"""How the chat interface appears in the OpenAPI document: the user key
schemes, chat ids, message payloads, the body of a bot's message and the live
stream (loaded by ChatConfig.ready)."""

from copy import deepcopy
from typing import Any

from django.conf import settings
from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import Direction, OpenApiParameter

from chat.event_types import (
    EVENT_CREATED,
    MESSAGE_CREATED,
    MESSAGE_DELETED,
    MESSAGE_UPDATED,
    PARTICIPANT_ADDED,
    PARTICIPANT_REMOVED,
)
from chat.keys import CHAT_ID_MAX_LENGTH
from chat.message_payloads import BLOC_ITEM_TYPES, PAYLOAD_TYPES, MessagePayloadField
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


class AdminSecretScheme(OpenApiAuthenticationExtension):
    target_class = "chat.authentication.AdminSecretAuthentication"
    name = "adminSecret"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "x-admin-secret",
            "description": "The chat connection's encryption key, which signs user keys",
        }


CHAT_ID_SCHEMA = {
    "type": "string",
    "pattern": f"^[A-Za-z0-9_/-]{{1,{CHAT_ID_MAX_LENGTH}}}$",
}
WEBHOOK_ID_SCHEMA = {"type": "string", "pattern": r"^[^/\x00]{1,64}$"}
# The chat interface's path variables that are not ids of the kind their name
# says (ChatInterfaceViewSet.path_parameters); message and event ids are runtime ids.
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


def _typeless_payload_schema(
    auto_schema: AutoSchema, direction: Direction, kind: str, *, type_schema: dict[str, Any]
) -> dict[str, Any]:
    """The schema of a `kind` payload whose `type` may be left out (and, when
    given, is `type_schema`)."""
    schema = deepcopy(auto_schema._map_serializer(PAYLOAD_TYPES[kind], direction))
    schema["properties"]["type"] = type_schema
    schema["required"] = [name for name in schema.get("required", []) if name != "type"]
    return schema


class BlocItemScheme(OpenApiSerializerFieldExtension):
    """An item of a bloc: a payload of one of the item types, flat or as
    `{type, payload: {...}}` (where the inner `type`, if any, is ignored)."""

    target_class = "chat.message_payloads.BlocItem"

    def get_name(self) -> str:
        return "BlocItem"

    def map_serializer_field(self, auto_schema: AutoSchema, direction: Direction) -> dict[str, Any]:
        variants: list[dict[str, Any]] = []
        for kind, serializer in BLOC_ITEM_TYPES.items():
            variants.append(auto_schema.resolve_serializer(serializer, direction).ref)
            inner = _typeless_payload_schema(
                auto_schema,
                direction,
                kind,
                type_schema={"$ref": "#/components/schemas/JsonValue", "description": "Ignored"},
            )
            variants.append(
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["type", "payload"],
                    "properties": {"type": {"const": kind}, "payload": inner},
                }
            )
        return {"oneOf": variants}


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
                    "payload": _typeless_payload_schema(
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
                    "init",
                    MESSAGE_CREATED,
                    MESSAGE_UPDATED,
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
    (chat.live.views.listen), not a DRF one, so drf-spectacular does not see it
    (a POSTPROCESSING_HOOKS entry)."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["LiveEvent"] = _live_event_schema()
    schemas["LiveEventMessage"] = {
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
                            "schema": {"$ref": "#/components/schemas/LiveEventMessage"}
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
    result["paths"]["/chat/{webhook_id}/initialize"] = _initialize_path(parameters[:1], error_body)
    return result


def _initialize_path(parameters: list[dict[str, Any]], error_body: dict[str, Any]) -> Any:
    """GET {chat}/{webhookId}/initialize: the official webchat's start
    (chat.live.views.initialize), an async Django view like the live stream."""
    conversation = {
        "in": "query",
        "name": "conversationId",
        "required": False,
        "description": "The conversation to resume; without it, one is made",
        "schema": dict(CHAT_ID_SCHEMA),
    }
    return {
        "get": {
            "operationId": "chatInitialize",
            "summary": "Start the official webchat: its user, conversation and live stream",
            "description": (
                "Without `x-user-key` a user is made (as POST users makes one), without"
                " `conversationId` a conversation owned by the user. The answer is the"
                " conversation's live stream (as `.../listen`), whose first event is"
                " `init`: `{conversation, messages (newest first), participants, user}`,"
                " the user with its `userKey`."
            ),
            "tags": ["chat"],
            "security": [{"userKey": []}, {}],
            "parameters": [*parameters, conversation],
            "responses": {
                "200": {
                    "description": "The live stream, `init` first",
                    "content": {
                        "text/event-stream": {
                            "schema": {"$ref": "#/components/schemas/LiveEventMessage"}
                        }
                    },
                },
                **{
                    str(status): error_response(status, error_body)
                    for status in (400, 401, 403, 404, 429, 503)
                },
            },
        }
    }
