"""The OpenAPI document (GET /v1/openapi.json), exact enough that a client or a
fuzzer that keeps to it is never refused, and one that strays from it always is.

drf-spectacular builds it from the views and serializers; this module states
what they cannot say by themselves:

- ApiAutoSchema (DEFAULT_SCHEMA_CLASS): each operation's tag, the pattern of
  each id in its path, and every error status it can answer, all with the one
  error body; and the Idempotency-Key of the POSTs that create;
- ClosedSerializerScheme: request bodies are closed (`additionalProperties:
  false`), a serializer's `exactly_one_of` is a `oneOf` and its
  `at_most_one_of` a `not` of any two;
- postprocess_schema: no string may hold NUL (PostgreSQL stores none), and
  free-form JSON is JSON that can be stored.
"""

import inspect
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from drf_spectacular.extensions import (
    OpenApiSerializerExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ComponentRegistry, is_list_serializer
from drf_spectacular.utils import Direction, OpenApiParameter, OpenApiResponse
from rest_framework import serializers
from uritemplate import variables

from platform_site.api import errors
from platform_site.api.fields import HTTP_URL_RE
from platform_site.foundation.ids import ULID_LENGTH

# Any string the API takes: PostgreSQL stores no NUL character (U+0000).
NO_NUL_PATTERN = r"^[^\x00]*$"
ULID_PATTERN = f"[0-9A-HJKMNP-TV-Z]{{{ULID_LENGTH}}}"
JSON_VALUE = "#/components/schemas/JsonValue"
JSON_OBJECT = "#/components/schemas/JsonObject"


def id_pattern(*prefixes: str) -> str:
    """The pattern of an id of one of these kinds: `<prefix>_<ULID>`."""
    kinds = prefixes[0] if len(prefixes) == 1 else f"(?:{'|'.join(prefixes)})"
    return f"^{kinds}_{ULID_PATTERN}$"


def blank_or(pattern: str) -> str:
    """An anchored pattern that also takes the empty string."""
    return f"^(?:{pattern.removeprefix('^').removesuffix('$')})?$"


def id_schema(*prefixes: str) -> dict[str, Any]:
    return {"type": "string", "pattern": id_pattern(*prefixes)}


# A path id named `<noun>_id` is an id of this kind unless the view says
# otherwise (in its `path_parameters`): anything else is 400 InvalidIdentifier.
PATH_ID_PREFIXES = {
    "bot_id": "bot",
    "conversation_id": "conv",
    "event_id": "evt",
    "member_id": "member",
    "message_id": "msg",
    "user_id": "user",
    "workspace_id": "wkspace",
}


def _error_types() -> dict[int, list[str]]:
    """The error types each status carries, from the error classes themselves."""
    found: dict[int, set[str]] = {}
    pending: list[type[errors.APIError]] = [errors.APIError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        found.setdefault(cls.status_code, set()).add(cls.type)
    return {status: sorted(types) for status, types in sorted(found.items())}


ERROR_TYPES = _error_types()


class ErrorBodySerializer(serializers.Serializer):
    """The one error body of every endpoint."""

    id = serializers.RegexField(
        r"^err_[0-9]+x[0-9A-F]{8}$",
        help_text="Unique per occurrence (the server logs it), e.g. err_1732269600000x4F2A9C1B",
    )
    code = serializers.IntegerField(min_value=400, max_value=599, help_text="The HTTP status")
    type = serializers.ChoiceField(
        choices=sorted({t for types in ERROR_TYPES.values() for t in types}),
        help_text="What went wrong, one of the contract's error types",
    )
    message = serializers.CharField(help_text="For humans: what was wrong, and where")


_ERROR_DESCRIPTIONS = {
    400: "The request is malformed: its body (InvalidPayload), a query parameter"
    " (InvalidQuery), a path id (InvalidIdentifier), or it names an object the"
    " caller does not have (ReferenceNotFound)",
    401: "Credentials are missing or invalid",
    403: "The credentials do not allow this",
    404: "The path names nothing the caller can see",
    409: "A caller-chosen id or key is taken (AlreadyExists), or the answer kept for this"
    " Idempotency-Key expired while this request ran (IdempotencyConflict)",
    413: "The request body is over the limit",
    415: "The request body is not application/json",
    422: "The Idempotency-Key was used with another request (IdempotencyMismatch)",
    429: "Over a rate limit (RateLimited): retry after Retry-After seconds; RateLimit says which",
    503: "The database or broker is out of reach: retry after Retry-After seconds",
}
# Name: (description, always sent).
_ERROR_HEADERS = {
    401: {"WWW-Authenticate": ("The scheme to authenticate with", True)},
    409: {"Retry-After": ("Seconds to wait before retrying (IdempotencyConflict)", False)},
    429: {"Retry-After": ("Seconds to wait before retrying", True)},
    503: {"Retry-After": ("Seconds to wait before retrying", True)},
}
# On the answers of an operation whose requests count against rate limits,
# unless the limiter is off or out of reach.
RATE_LIMIT_HEADERS = {
    name: {"description": text, "schema": {"type": "string"}}
    for name, text in {
        "RateLimit-Policy": "The rate limit policies the request counted against (IETF httpapi"
        ' ratelimit-headers draft), e.g. `"workspace";q=600;w=60, "token";q=3000;w=60`: `q`'
        " requests per `w` seconds",
        "RateLimit": "Where each policy stands after the request, e.g."
        ' `"workspace";r=599;t=1, "token";r=2999;t=1`: `r` requests left now, `t` seconds'
        " until the whole limit is back",
    }.items()
}

# ApiAutoSchema adds the error statuses an operation can answer; a view
# names only those it alone gives, with this.
ERROR = OpenApiResponse(ErrorBodySerializer, description="The error body")

NEXT_TOKEN = OpenApiParameter(
    "nextToken",
    {"type": "string"},
    description=(
        "meta.nextToken of the previous page; empty or left out for the first page. A token"
        " the server did not issue for this list is 400 InvalidQuery."
    ),
)
PAGE_SIZE = OpenApiParameter(
    "pageSize",
    {
        "type": "integer",
        "minimum": 1,
        "maximum": settings.PAGE_SIZE_MAX,
        "default": settings.PAGE_SIZE_DEFAULT,
    },
    description="Items per page",
)
TAGS = OpenApiParameter(
    "tags",
    {"type": "object", "additionalProperties": {"type": "string"}},
    style="deepObject",
    explode=True,
    description=(
        "`tags[<key>]=<value>` (or `tags.<key>=<value>`): only those with each of these tags."
        " A key given twice is 400."
    ),
)


# A view method bearing this attribute (set by platform_site.api.idempotency.idempotent_create)
# takes an Idempotency-Key: its operation documents the header and its answers.
TAKES_IDEMPOTENCY_KEY = "takes_idempotency_key"
IDEMPOTENCY_KEY_MAX_LENGTH = 255
IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    {
        "type": "string",
        "minLength": 1,
        "maxLength": IDEMPOTENCY_KEY_MAX_LENGTH,
        # Printable ASCII; HTTP drops a value's surrounding spaces on the way.
        "pattern": r"^[\x21-\x7E](?:[\x20-\x7E]*[\x21-\x7E])?$",
    },
    OpenApiParameter.HEADER,
    description=(
        "A key of the client's choosing (a UUID, say) that makes a retry safe: for"
        f" {settings.IDEMPOTENCY_KEY_TTL_HOURS:g} hours, the same request with the same key and"
        " credentials gets the first 2xx answer again, with `Idempotent-Replayed: true`, and"
        " creates nothing; a retry sent while the first request runs waits for its answer. The"
        " key reused with another request is 422. An error answer is not kept: the key may be"
        " sent again."
    ),
)
IDEMPOTENT_REPLAYED = {
    "Idempotent-Replayed": {
        "description": "Sent on the answer repeated for a retry with an Idempotency-Key",
        "schema": {"type": "string", "enum": ["true"]},
    }
}


def query_id_filter(name: str, description: str) -> OpenApiParameter:
    """A query parameter that narrows a list to one object: empty (no filter)
    or 28 to 36 characters; an id of nothing matches nothing."""
    return OpenApiParameter(
        name, {"type": "string", "pattern": blank_or(r"[^\x00]{28,36}")}, description=description
    )


def _operation_tag(path: str) -> str:
    if path.startswith("/v1/admin/"):
        return "admin"
    if path.startswith(("/v1/chat/", "/v1/files")):
        return "runtime"
    if path.startswith(("/v1/uploads/", "/v1/downloads/")):
        return "signed URLs"
    if path.startswith("/chat/"):
        return "chat"
    return "service"


def error_response(status: int, registry_ref: dict[str, Any]) -> dict[str, Any]:
    """The response object of an error status: the error body, its `code`
    the status and its `type` one of that status's types."""
    response: dict[str, Any] = {
        "description": _ERROR_DESCRIPTIONS.get(status, "An error"),
        "content": {
            "application/json": {
                "schema": {
                    "allOf": [
                        registry_ref,
                        {
                            "type": "object",
                            "properties": {
                                "code": {"const": status},
                                "type": {"enum": ERROR_TYPES.get(status, [])},
                            },
                        },
                    ]
                }
            }
        },
    }
    headers = _ERROR_HEADERS.get(status)
    if headers:
        response["headers"] = {
            name: {"required": required, "description": text, "schema": {"type": "string"}}
            for name, (text, required) in headers.items()
        }
    return response


class ApiAutoSchema(AutoSchema):
    """The schema of every API operation (settings.REST_FRAMEWORK's DEFAULT_SCHEMA_CLASS).

    A view may declare `path_parameters` (OpenApiParameters in the path) for
    path variables that are not ids of the kind their name says,
    `error_statuses`, statuses it answers beyond those its shape implies, and
    `answers` (platform_site.api.answers.Answers), the shapes of its answers."""

    def get_tags(self) -> list[str]:
        return [_operation_tag(self.path)]

    def get_description(self) -> str:  # type: ignore[override] # drf-spectacular's signature
        # An operation is described by its action's docstring, not by the
        # resource's (which describes the class to its readers).
        action = getattr(self.view, "action", None)
        own = getattr(getattr(self.view, action, None), "__doc__", None) if action else None
        return inspect.cleandoc(own) if own else ""

    def get_override_parameters(self) -> list[Any]:
        in_path = set(variables(self.path))
        declared = [p for p in getattr(self.view, "path_parameters", []) if p.name in in_path]
        named = {parameter.name for parameter in declared}
        defaults = [
            OpenApiParameter(
                name,
                id_schema(PATH_ID_PREFIXES[name]),
                OpenApiParameter.PATH,
                description=f"An id `{PATH_ID_PREFIXES[name]}_…`; anything else is 400",
            )
            for name in variables(self.path)
            if name in PATH_ID_PREFIXES and name not in named
        ]
        idempotency = [IDEMPOTENCY_KEY] if self._takes_idempotency_key() else []
        return [*defaults, *declared, *idempotency, *super().get_override_parameters()]

    def get_response_serializers(self) -> Any:
        # The answers a resource declares once (platform_site.api.answers.Answers),
        # where the action's own extend_schema does not name its answer.
        action = getattr(self.view, "action", None)
        answers = getattr(self.view, "answers", None)
        found = answers.of(action) if answers is not None and action else None
        return found if found is not None else super().get_response_serializers()

    def _is_list_view(self, serializer: Any = None) -> bool:
        # Every answer is an object, lists included ({"bots": [...], "meta":
        # {...}}): a viewset's `list` action is no array to wrap, and only a
        # declared list serializer is a list, as for a plain APIView.
        if serializer is None:
            serializer = self.get_response_serializers()
        if isinstance(serializer, dict) and serializer:
            serializer = serializer[min(serializer, key=str)]
        return is_list_serializer(serializer)

    def _takes_idempotency_key(self) -> bool:
        # A viewset's handler is its action; drf-spectacular does not bind it to the method.
        action = getattr(self.view, "action", None) or self.method.lower()
        handler = getattr(self.view, action, None)
        return bool(getattr(handler, TAKES_IDEMPOTENCY_KEY, False))

    def get_operation(
        self,
        path: str,
        path_regex: str,
        path_prefix: str,
        method: str,
        registry: ComponentRegistry,
    ) -> dict[str, Any] | None:
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        responses = operation.setdefault("responses", {})
        ref = self.resolve_serializer(ErrorBodySerializer, "response").ref
        for status in self._error_statuses(operation):
            responses[str(status)] = error_response(status, ref)
        operation["responses"] = responses = dict(sorted(responses.items()))
        if self._takes_idempotency_key():
            for status, response in responses.items():
                if status.startswith("2"):
                    response.setdefault("headers", {}).update(IDEMPOTENT_REPLAYED)
        if getattr(self.view, "rate_limited", False):
            for status, response in responses.items():
                if status.startswith("2") or status == "429":
                    response.setdefault("headers", {}).update(RATE_LIMIT_HEADERS)
        return operation

    def _error_statuses(self, operation: dict[str, Any]) -> set[int]:
        # Any request may be refused as malformed (a NUL in its path or query,
        # a body without Content-Length) or meet an unreachable database.
        statuses = {400, 503, *getattr(self.view, "error_statuses", ())}
        if self._takes_idempotency_key():
            statuses |= {409, 422}
        if getattr(self.view, "rate_limited", False):
            statuses.add(429)
        if self.view.authentication_classes:
            statuses |= {401, 403}
        if variables(self.path):
            statuses.add(404)
        body = operation.get("requestBody")
        if body:
            statuses.add(413)
            if "application/json" in body.get("content", {}):
                statuses.add(415)
        for status in operation.get("responses", {}):
            if status.isdigit() and int(status) >= 400:
                statuses.add(int(status))
        return statuses


class ClosedSerializerScheme(OpenApiSerializerExtension):
    """A ClosedSerializer refuses fields it does not declare, and one with
    `exactly_one_of` takes exactly one of those fields."""

    target_class = "platform_site.api.serializers.ClosedSerializer"
    match_subclasses = True

    def map_serializer(self, auto_schema: AutoSchema, direction: Direction) -> dict[str, Any]:
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        return closed_schema(self.target, schema)


def closed_schema(serializer: Any, schema: dict[str, Any]) -> dict[str, Any]:
    schema["additionalProperties"] = False
    if not type(serializer).__dict__.get("__doc__"):
        # An inherited docstring (ClosedSerializer's) says nothing of this body.
        schema.pop("description", None)
    properties = schema.get("properties", {})
    for name, field in serializer.fields.items():
        if getattr(field, "allow_empty", True) is False and name in properties:
            properties[name]["minItems"] = max(properties[name].get("minItems", 0), 1)
    one_of = getattr(serializer, "exactly_one_of", ())
    if one_of:
        schema["oneOf"] = [{"required": [name]} for name in one_of]
    at_most_one = getattr(serializer, "at_most_one_of", ())
    if at_most_one:
        schema["not"] = {"anyOf": [{"required": list(pair)} for pair in _pairs(at_most_one)]}
    for name, constraints in getattr(serializer, "schema_constraints", {}).items():
        properties[name].update(constraints)
    return schema


def _pairs(names: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]


class ReferenceFieldScheme(OpenApiSerializerFieldExtension):
    """A reference states the pattern of what it can name."""

    target_class = "platform_site.api.fields.ReferenceField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: AutoSchema, direction: Direction) -> dict[str, Any]:
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        schema.pop("minLength", None)
        schema.pop("maxLength", None)
        schema["pattern"] = self.target.pattern
        return schema


class HttpUrlFieldScheme(OpenApiSerializerFieldExtension):
    """An http(s) URL of HTTP_URL_RE (or "" where a blank clears it)."""

    target_class = "platform_site.api.fields.HttpUrlField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: AutoSchema, direction: Direction) -> dict[str, Any]:
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        schema.pop("format", None)
        schema.pop("minLength", None)
        # drf-spectacular adds the empty string as a oneOf where a blank is taken.
        schema["pattern"] = f"^{HTTP_URL_RE}$"
        return schema


def _json_components() -> dict[str, Any]:
    """Free-form JSON as the server stores it: strings and keys without NUL
    (numbers are finite by JSON's own grammar). Nesting is also bounded (64
    levels), which no schema keyword states."""
    return {
        "JsonValue": {
            "description": "Any JSON value that can be stored: no string or key holds NUL",
            "anyOf": [
                {"type": ["null", "boolean", "number"]},
                {"type": "string", "pattern": NO_NUL_PATTERN},
                {"type": "array", "items": {"$ref": JSON_VALUE}},
                {"$ref": JSON_OBJECT},
            ],
        },
        "JsonObject": {
            "type": "object",
            "description": "A JSON object that can be stored: no string or key holds NUL",
            "propertyNames": {"pattern": NO_NUL_PATTERN},
            "additionalProperties": {"$ref": JSON_VALUE},
        },
    }


def _subschemas(schema: Any) -> Iterator[dict[str, Any]]:
    """Every schema object in a schema, itself included."""
    if isinstance(schema, list):
        for item in schema:
            yield from _subschemas(item)
        return
    if not isinstance(schema, dict):
        return
    yield schema
    for key, value in schema.items():
        if key in ("properties", "patternProperties", "$defs"):
            for child in value.values():
                yield from _subschemas(child)
        elif key in ("items", "additionalProperties", "propertyNames", "not", "contains"):
            yield from _subschemas(value)
        elif key in ("allOf", "anyOf", "oneOf", "prefixItems"):
            yield from _subschemas(value)


def _is_plain_string(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    is_string = kind == "string" or (isinstance(kind, list) and "string" in kind)
    constrained = any(key in schema for key in ("pattern", "enum", "const", "format"))
    return is_string and not constrained


def _nullable_to_type(schema: dict[str, Any]) -> None:
    """OpenAPI 3.0's `nullable`, left by raw schemas, as 3.1's type list
    (and the mark of drf-spectacular's enum hook, which is not used, out)."""
    schema.pop("x-spec-enum-id", None)
    if schema.pop("nullable", False) and isinstance(schema.get("type"), str):
        schema["type"] = [schema["type"], "null"]
    if isinstance(schema.get("type"), list):
        schema["type"] = list(dict.fromkeys(schema["type"]))


def _all_schemas(result: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from _subschemas(list(result.get("components", {}).get("schemas", {}).values()))
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            if not isinstance(operation, dict):
                continue
            for parameter in operation.get("parameters", []):
                yield from _subschemas(parameter.get("schema"))
            for media in operation.get("requestBody", {}).get("content", {}).values():
                yield from _subschemas(media.get("schema"))


def postprocess_schema(result: dict[str, Any], generator: Any, **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular's last word on the document (POSTPROCESSING_HOOKS)."""
    result.setdefault("components", {}).setdefault("schemas", {}).update(_json_components())
    for schema in _all_schemas(result):
        _nullable_to_type(schema)
        if _is_plain_string(schema):
            schema["pattern"] = NO_NUL_PATTERN
        if schema.get("additionalProperties", False) is not False:
            # Keys are strings too.
            names = schema.setdefault("propertyNames", {})
            if isinstance(names, dict) and "pattern" not in names:
                names["pattern"] = NO_NUL_PATTERN
    return result
