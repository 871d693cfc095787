"""How the token schemes and message payloads appear in the OpenAPI document
(loaded by BotsConfig.ready)."""

from copy import deepcopy
from typing import Any

from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import Direction

from bots.message_payloads import BLOC_ITEM_TYPES, PAYLOAD_TYPES

_BEARER = {"type": "http", "scheme": "bearer", "description": "A personal access token, bp_pat_…"}


class BotTokenScheme(OpenApiAuthenticationExtension):
    target_class = "bots.authentication.BotTokenAuthentication"
    name = ["runtimeToken", "botId"]

    def get_security_definition(self, auto_schema: Any) -> list[dict[str, str]]:
        return [_BEARER, {"type": "apiKey", "in": "header", "name": "x-bot-id"}]


class WorkspaceTokenScheme(OpenApiAuthenticationExtension):
    target_class = "bots.authentication.WorkspaceTokenAuthentication"
    name = ["adminToken", "workspaceId"]

    def get_security_definition(self, auto_schema: Any) -> list[dict[str, str]]:
        return [_BEARER, {"type": "apiKey", "in": "header", "name": "x-workspace-id"}]


def typeless_payload_schema(
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

    target_class = "bots.message_payloads.BlocItem"

    def get_name(self) -> str:
        return "BlocItem"

    def map_serializer_field(self, auto_schema: AutoSchema, direction: Direction) -> dict[str, Any]:
        variants: list[dict[str, Any]] = []
        for kind, serializer in BLOC_ITEM_TYPES.items():
            variants.append(auto_schema.resolve_serializer(serializer, direction).ref)
            inner = typeless_payload_schema(
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
