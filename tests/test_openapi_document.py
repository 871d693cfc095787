"""GET /v1/openapi.json states the rules the server enforces on requests, so
that a request that keeps to it is never refused for its shape and any other
is: bounds, id patterns, closed bodies, unions, and the error answers of each
operation. `make test-schema` (.ci/schemathesis) holds the live server to it;
these tests pin what it says."""

import re
from collections.abc import Iterator
from typing import Any

import pytest
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

from chat.message_payloads import PAYLOAD_TYPES
from platform_site.api.errors import APIError
from platform_site.foundation.ids import new_id

METHODS = {"get", "put", "post", "delete", "patch"}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    response = APIClient().get("/v1/openapi.json")
    assert response.status_code == 200
    return response.json()


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield path, method, operation


def resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def parameter(operation: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in operation["parameters"] if p["name"] == name)


def test_the_document_is_valid_openapi_3_1(document):
    assert document["openapi"] == "3.1.0"
    validate_schema(document)


def test_every_operation_has_an_id_and_a_tag(document):
    ids = [operation["operationId"] for _, _, operation in operations(document)]
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"[a-z][A-Za-z]+", operation_id) for operation_id in ids), ids
    for _, _, operation in operations(document):
        assert operation["tags"][0] in {"runtime", "admin", "chat", "signed URLs", "service"}


def test_every_operation_states_its_error_answers_with_the_one_body(document):
    for path, method, operation in operations(document):
        responses = operation["responses"]
        expected = {"400", "503"}
        if any(requirement for requirement in operation.get("security", [])):
            expected |= {"401", "403"}
        if "{" in path:
            expected.add("404")
        if "requestBody" in operation:
            expected.add("413")
        assert expected <= set(responses), (method, path, sorted(responses))
        for status, response in responses.items():
            if int(status) < 400:
                continue
            schema = response["content"]["application/json"]["schema"]
            assert schema["allOf"][0] == {"$ref": "#/components/schemas/ErrorBody"}
            assert schema["allOf"][1]["properties"]["code"] == {"const": int(status)}


def test_every_json_answer_is_a_named_schema(document):
    """No untyped 2xx body: each is a component, so a client generator names it."""
    untyped = [
        (method, path, status)
        for path, method, operation in operations(document)
        for status, response in operation["responses"].items()
        if status.startswith("2")
        for media, content in response.get("content", {}).items()
        if media == "application/json" and "$ref" not in content["schema"]
    ]
    assert untyped == []


def test_an_answer_of_nothing_is_a_closed_empty_object(document):
    [operation] = [
        op for _, _, op in operations(document) if op["operationId"] == "deleteConversation"
    ]
    schema = resolve(
        document, operation["responses"]["200"]["content"]["application/json"]["schema"]
    )
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert "properties" not in schema


def test_the_error_body_names_every_error_type(document):
    body = document["components"]["schemas"]["ErrorBody"]
    assert set(body["required"]) == {"id", "code", "type", "message"}
    types: set[str] = set()
    pending: list[type[APIError]] = [APIError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        types.add(cls.type)
    assert set(body["properties"]["type"]["enum"]) == types


def test_a_401_says_how_to_authenticate(document):
    for _, _, operation in operations(document):
        if "401" in operation["responses"]:
            assert operation["responses"]["401"]["headers"]["WWW-Authenticate"]["required"]


@pytest.mark.parametrize(
    ("path", "name", "prefix"),
    [
        ("/v1/chat/events/{event_id}", "event_id", "evt"),
        ("/v1/chat/messages/{message_id}", "message_id", "msg"),
        ("/v1/chat/conversations/{conversation_id}", "conversation_id", "conv"),
        ("/v1/chat/users/{user_id}", "user_id", "user"),
        ("/v1/admin/bots/{bot_id}", "bot_id", "bot"),
        ("/v1/admin/workspace-members/{member_id}", "member_id", "member"),
        ("/v1/admin/workspaces/{workspace_id}/audit-records", "workspace_id", "wkspace"),
        ("/chat/{webhook_id}/messages/{message_id}", "message_id", "msg"),
        ("/chat/{webhook_id}/events/{event_id}", "event_id", "evt"),
    ],
)
def test_path_ids_have_the_pattern_of_their_prefix(document, path, name, prefix):
    item = document["paths"][path]
    for method in METHODS & set(item):
        pattern = parameter(item[method], name)["schema"]["pattern"]
        assert re.fullmatch(pattern.strip("^$"), new_id(prefix))
        assert not re.fullmatch(pattern.strip("^$"), new_id("other"))
        assert not re.fullmatch(pattern.strip("^$"), new_id(prefix)[:-1])


def test_chat_ids_in_paths_are_chosen_by_the_caller(document):
    operation = document["paths"]["/chat/{webhook_id}/conversations/{conversation_id}"]["get"]
    assert parameter(operation, "conversation_id")["schema"]["pattern"] == (
        "^[A-Za-z0-9_/-]{1,70}$"
    )


def test_a_file_is_named_by_id_or_key(document):
    operation = document["paths"]["/v1/files/{file_id}"]["get"]
    assert parameter(operation, "file_id")["schema"]["pattern"] == r"^[^\x00]{1,500}$"


def test_page_sizes_are_bounded(document):
    seen = 0
    for _, _, operation in operations(document):
        for param in operation.get("parameters", []):
            if param["name"] in ("pageSize", "limit"):
                seen += 1
                assert (param["schema"]["minimum"], param["schema"]["maximum"]) == (1, 200)
    assert seen >= 14


def _request_components(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every object schema reachable from a JSON request body."""
    pending = [
        operation["requestBody"]["content"]["application/json"]["schema"]
        for _, _, operation in operations(document)
        if "application/json" in operation.get("requestBody", {}).get("content", {})
    ]
    seen: set[str] = set()
    while pending:
        schema = pending.pop()
        if "$ref" in schema:
            if schema["$ref"] in seen:
                continue
            seen.add(schema["$ref"])
        schema = resolve(document, schema)
        yield schema
        pending.extend(schema.get("properties", {}).values())
        for key in ("items", "additionalProperties"):
            if isinstance(schema.get(key), dict):
                pending.append(schema[key])
        for key in ("oneOf", "anyOf", "allOf"):
            pending.extend(schema.get(key, []))


def test_request_bodies_are_closed(document):
    closed = 0
    for schema in _request_components(document):
        if schema.get("type") == "object" and "properties" in schema:
            assert schema["additionalProperties"] is False, schema
            closed += 1
    assert closed > 20


def test_a_schedule_is_one_of_its_fields(document):
    schedule = document["components"]["schemas"]["Schedule"]
    assert schedule["oneOf"] == [{"required": ["dateTime"]}, {"required": ["delay"]}]
    assert schedule["additionalProperties"] is False
    assert schedule["properties"]["delay"]["minimum"] == 0


def test_a_bot_takes_its_webhook_url_under_one_name_at_most(document):
    bot = document["components"]["schemas"]["BotWrite"]
    assert {"url", "webhookUrl"} <= set(bot["properties"])
    assert bot["not"] == {"anyOf": [{"required": ["url", "webhookUrl"]}]}


@pytest.mark.parametrize(
    ("operation_id", "status", "component"),
    [
        ("listWorkspaceMembers", "200", "WorkspaceMemberList"),
        ("getWorkspaceMember", "200", "WorkspaceMember"),
        ("createWorkspaceMember", "201", "WorkspaceMember"),
        ("updateWorkspaceMember", "200", "WorkspaceMember"),
        ("getAuditRecords", "200", "AuditRecordList"),
        ("listBots", "200", "BotList"),
        ("getBot", "200", "BotAnswer"),
        ("createBot", "201", "BotAnswer"),
        ("updateBot", "200", "BotAnswer"),
    ],
)
def test_admin_answers_are_documented_as_the_hosted_client_types_them(
    document, operation_id, status, component
):
    (operation,) = [op for _, _, op in operations(document) if op["operationId"] == operation_id]
    schema = operation["responses"][status]["content"]["application/json"]["schema"]
    assert schema == {"$ref": f"#/components/schemas/{component}"}


def test_a_member_and_an_audit_record_have_the_hosted_fields(document):
    schemas = document["components"]["schemas"]
    member = schemas["WorkspaceMember"]
    assert set(member["required"]) == {"id", "email", "createdAt", "role"}
    assert {"userId", "displayName"} <= set(member["properties"])
    record = schemas["AuditRecord"]
    assert set(record["required"]) == {"id", "recordedAt", "userId", "resourceId", "action"}
    assert "UNKNOWN" in record["properties"]["action"]["enum"]


def test_message_payloads_are_a_union_on_their_type(document):
    union = document["components"]["schemas"]["MessagePayload"]
    assert union["discriminator"]["propertyName"] == "type"
    assert set(union["discriminator"]["mapping"]) == set(PAYLOAD_TYPES)
    for kind, ref in union["discriminator"]["mapping"].items():
        payload = resolve(document, {"$ref": ref})
        assert kind in payload["properties"]["type"]["enum"]
        assert "type" in payload["required"]


def test_a_bots_message_takes_its_type_beside_or_inside_the_payload(document):
    body = document["components"]["schemas"]["BotMessageCreate"]
    kinds = [branch["properties"]["type"]["const"] for branch in body["oneOf"][:-1]]
    assert kinds == list(PAYLOAD_TYPES)
    assert body["oneOf"][-1]["not"] == {"required": ["type"]}


def test_strings_may_not_hold_nul(document):
    event = document["components"]["schemas"]["EventCreate"]
    assert event["properties"]["type"]["pattern"] == r"^[^\x00]*$"
    assert document["components"]["schemas"]["JsonObject"]["propertyNames"]["pattern"] == (
        r"^[^\x00]*$"
    )


def test_the_live_stream_is_documented(document):
    operation = document["paths"]["/chat/{webhook_id}/conversations/{conversation_id}/listen"]
    get = operation["get"]
    assert get["security"] == [{"userKey": []}]
    assert "text/event-stream" in get["responses"]["200"]["content"]
    assert {"400", "401", "403", "404"} <= set(get["responses"])


def test_the_upload_url_is_documented(document):
    put = document["paths"]["/v1/uploads/{token}"]["put"]
    assert put["operationId"] == "uploadFileContent"
    assert put["security"] == [{}]
    assert put["requestBody"]["content"]["*/*"]["schema"]["format"] == "binary"
    assert {"400", "403", "404", "413"} <= set(put["responses"])
