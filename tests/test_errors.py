"""The one error body, from every layer: parser, middleware, router, views."""

import logging
import re
import sys
from typing import Any

import pytest
from rest_framework.test import APIClient

from events.models import Event
from platform_site.api import middleware
from tests.conftest import assert_error
from tests.factories import FileFactory

pytestmark = pytest.mark.django_db

EVENTS = "/v1/chat/events"
ONE_MB = 1024 * 1024
ERROR_ID_RE = re.compile(r"err_\d{13}x[0-9A-F]{8}")


def post_raw(client: Any, body: str | bytes, content_type: str = "application/json") -> Any:
    return client.post(EVENTS, data=body, content_type=content_type)


def assert_refused_raw(
    client: Any, body: str | bytes, status: int, error_type: str, **kwargs: Any
) -> dict[str, Any]:
    """The raw body is refused with this error, and no event is written."""
    before = Event.objects.count()
    response = post_raw(client, body, **kwargs)
    error = assert_error(response, status, error_type)
    assert response["Content-Type"] == "application/json"
    assert Event.objects.count() == before
    return error


def event_body_of_size(size: int) -> str:
    head, tail = '{"type":"t","payload":{"pad":"', '"}}'
    body = head + "x" * (size - len(head) - len(tail)) + tail
    assert len(body.encode()) == size
    return body


@pytest.fixture
def client(runtime_client: Any) -> APIClient:
    """A developer's runtime client that hands back 500s instead of raising."""
    made = runtime_client()
    made.raise_request_exception = False
    return made


# --- request bodies -------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        pytest.param('{"type": "t", "payload": {}', id="truncated"),
        pytest.param('{"type": "t", "payload": {},}', id="trailing-comma"),
        pytest.param("{'type': 't', 'payload': {}}", id="single-quotes"),
        pytest.param("type=t&payload=x", id="form-encoded-as-json"),
        pytest.param('{"type": "t", "payload": {}} {}', id="two-documents"),
        pytest.param("nul", id="bare-word"),
    ],
)
def test_malformed_json_is_400_invalid_payload(client, body):
    assert_refused_raw(client, body, 400, "InvalidPayload")


def test_invalid_utf8_is_400_invalid_payload(client):
    assert_refused_raw(client, b'{"type": "\xff\xfe", "payload": {}}', 400, "InvalidPayload")


def test_valid_json_with_charset_is_accepted(client):
    response = post_raw(
        client, '{"type": "t", "payload": {}}', content_type="application/json; charset=utf-8"
    )
    assert response.status_code == 201, response.content


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "application/xml"],
)
def test_body_that_is_not_json_is_415_unsupported_media_type(client, content_type):
    assert_refused_raw(
        client, "type=t&payload=x", 415, "UnsupportedMediaType", content_type=content_type
    )


def test_text_plain_holding_valid_json_is_still_415(client):
    assert_refused_raw(
        client,
        '{"type": "t", "payload": {}}',
        415,
        "UnsupportedMediaType",
        content_type="text/plain",
    )


def test_body_over_one_megabyte_is_413(client):
    assert_refused_raw(client, event_body_of_size(ONE_MB + 1), 413, "PayloadTooLarge")


def test_body_over_one_megabyte_is_413_even_without_credentials(api_client):
    assert_refused_raw(api_client, event_body_of_size(2 * ONE_MB), 413, "PayloadTooLarge")


def test_body_of_exactly_one_megabyte_is_not_too_large(client):
    response = post_raw(client, event_body_of_size(ONE_MB))
    assert response.status_code == 201, response.content[:300]
    assert Event.objects.count() == 1
    assert len(Event.objects.get().payload["pad"]) > ONE_MB - 100


def test_content_length_that_is_not_a_number_is_400(client):
    before = Event.objects.count()
    response = client.generic(
        "POST",
        EVENTS,
        '{"type": "t", "payload": {}}',
        content_type="application/json",
        CONTENT_LENGTH="lots",
    )
    assert_error(response, 400, "InvalidPayload")
    assert Event.objects.count() == before


@pytest.mark.parametrize(
    "body",
    [
        pytest.param('{"type": "t", "payload": {"a": "x\\u0000y"}}', id="payload-value"),
        pytest.param('{"type": "t", "payload": {"a\\u0000": 1}}', id="payload-key"),
        pytest.param('{"type": "t", "payload": {"a": [[{"b": ["\\u0000"]}]]}}', id="nested"),
        pytest.param('{"type": "t\\u0000", "payload": {}}', id="type"),
        pytest.param('{"type": "t", "payload": {}, "schedule": {"dateTime": "\\u0000"}}', id="dt"),
    ],
)
def test_nul_character_in_a_body_is_400_not_500(client, body):
    error = assert_refused_raw(client, body, 400, "InvalidPayload")
    assert "\x00" not in error["message"]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param('{"type": "t", "payload": {"a": "\\ud800"}}', id="payload-value"),
        pytest.param('{"type": "t", "payload": {"\\udfff": 1}}', id="payload-key"),
        pytest.param('{"type": "t", "payload": {"a": ["ok", "x\\udc00"]}}', id="nested"),
        pytest.param('{"type": "\\ud800", "payload": {}}', id="type"),
    ],
)
def test_lone_surrogate_in_a_body_is_400_not_500(client, body):
    # A lone UTF-16 surrogate is valid JSON escape syntax but no valid character:
    # it can be neither stored as UTF-8 nor sent back.
    assert_refused_raw(client, body, 400, "InvalidPayload")


@pytest.mark.parametrize(
    "number",
    ["1e400", "-1e400", "1E999", "[1e400]"],
)
def test_number_out_of_float_range_is_400(client, number):
    assert_refused_raw(
        client, '{"type": "t", "payload": {"n": ' + number + "}}", 400, "InvalidPayload"
    )


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_literal_is_400(client, literal):
    assert_refused_raw(
        client, '{"type": "t", "payload": {"n": ' + literal + "}}", 400, "InvalidPayload"
    )


def test_huge_integer_literal_is_400_not_500(client):
    assert_refused_raw(
        client, '{"type": "t", "payload": {"n": ' + "9" * 10000 + "}}", 400, "InvalidPayload"
    )


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("[" * 100_000, id="unclosed-arrays"),
        pytest.param("[" * 100_000 + "]" * 100_000, id="closed-arrays"),
        pytest.param(
            '{"type": "t", "payload": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}",
            id="inside-payload",
        ),
        pytest.param(
            '{"type": "t", "payload": ' + '{"a": ' * 50_000 + "1" + "}" * 50_000 + "}",
            id="nested-objects",
        ),
    ],
)
def test_deeply_nested_json_is_400(client, body):
    assert_refused_raw(client, body, 400, "InvalidPayload")


def test_nesting_at_every_depth_is_201_or_400_never_500(client):
    """Every depth either parses, is stored and answered (201), or is refused
    (400): there is no depth the parser takes but storing or rendering chokes on
    (such as one just under the recursion limit)."""
    limit = sys.getrecursionlimit()
    depths = [*range(1, 200), *range(max(200, limit - 300), limit + 20)]
    for depth in depths:
        body = '{"type": "t", "payload": {"a": ' + "[" * depth + "]" * depth + "}}"
        response = post_raw(client, body)
        assert response.status_code in (201, 400), (depth, response.status_code, response.content)
        if response.status_code == 400:
            assert_error(response, 400, "InvalidPayload")


def test_moderate_nesting_is_accepted_and_stored_as_sent(client):
    nested: Any = "leaf"
    for index in range(20):
        nested = {"k": [nested, index]}
    response = client.post(EVENTS, {"type": "t", "payload": nested}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["event"]["payload"] == nested
    assert Event.objects.get().payload == nested


# --- query strings and paths ----------------------------------------------------------


def test_nul_in_a_query_parameter_is_400_invalid_query(api_client):
    response = api_client.get("/v1/files/x/passages?nextToken=%00")
    assert_error(response, 400, "InvalidQuery")


def test_nul_in_a_query_parameter_is_400_for_an_authenticated_caller(client, bot):
    file = FileFactory(bot=bot)
    response = client.get(f"/v1/files/{file.id}/passages", {"nextToken": "abc\x00def"})
    assert_error(response, 400, "InvalidQuery")


def test_nul_in_an_admin_query_parameter_is_400_invalid_query(admin_client):
    response = admin_client().get("/v1/admin/bots", {"sortField": "\x00"})
    assert_error(response, 400, "InvalidQuery")


def test_nul_in_a_path_is_400(api_client):
    response = api_client.get("/v1/files/%00/passages")
    assert_error(response, 400, "InvalidIdentifier")


def test_nul_in_a_path_is_400_for_an_authenticated_caller(client):
    response = client.get("/v1/files/file_%00abc/passages")
    assert_error(response, 400, "InvalidIdentifier")


# --- routing ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/nope"),
        ("get", "/v1/chat/nope"),
        ("post", "/v1/unknown"),
        ("get", "/v1/chat/events/extra/segments/x"),
    ],
)
def test_unknown_route_is_404_json(api_client, method, path):
    response = getattr(api_client, method)(path)
    body = assert_error(response, 404, "ResourceNotFound")
    assert response["Content-Type"] == "application/json"
    assert "<" not in body["message"]


def test_unknown_route_with_accept_html_is_still_json(api_client):
    response = api_client.get("/nope", HTTP_ACCEPT="text/html")
    assert_error(response, 404, "ResourceNotFound")
    assert response["Content-Type"] == "application/json"
    assert b"<html" not in response.content.lower()


def test_wrong_method_on_events_is_405(client):
    before = Event.objects.count()
    for method in ("delete", "put", "patch"):
        response = getattr(client, method)(EVENTS)
        assert_error(response, 405, "MethodNotFound")
        assert response["Content-Type"] == "application/json"
    assert Event.objects.count() == before


@pytest.mark.parametrize("method", ["delete", "post", "put"])
def test_wrong_method_on_healthz_is_405(api_client, method):
    assert_error(getattr(api_client, method)("/healthz"), 405, "MethodNotFound")


def test_healthz_answers_get(api_client):
    response = api_client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_wrong_method_on_admin_bots_is_405(admin_client):
    assert_error(admin_client().delete("/v1/admin/bots"), 405, "MethodNotFound")


@pytest.mark.parametrize("accept", ["text/html", "application/xml", "text/html;q=1, */*;q=0.1"])
def test_accept_header_other_than_json_still_gets_json(client, api_client, accept):
    error = api_client.post(EVENTS, {"type": "t", "payload": {}}, format="json", HTTP_ACCEPT=accept)
    assert_error(error, 401, "Unauthorized")
    assert error["Content-Type"] == "application/json"

    success = client.post(EVENTS, {"type": "t", "payload": {}}, format="json", HTTP_ACCEPT=accept)
    assert success.status_code == 201, success.content
    assert success["Content-Type"] == "application/json"
    assert success.json()["event"]["status"] == "pending"

    invalid = post_raw(client, "{", content_type="application/json")
    assert_error(invalid, 400, "InvalidPayload")


def test_error_ids_are_unique_per_occurrence(api_client, client):
    first = assert_error(api_client.get("/nope"), 404, "ResourceNotFound")
    second = assert_error(api_client.get("/nope"), 404, "ResourceNotFound")
    third = assert_error(post_raw(client, "{"), 400, "InvalidPayload")
    fourth = assert_error(post_raw(client, "{"), 400, "InvalidPayload")
    ids = [first["id"], second["id"], third["id"], fourth["id"]]
    assert len(set(ids)) == 4
    for error_id in ids:
        assert ERROR_ID_RE.fullmatch(error_id), error_id


def test_error_body_has_exactly_the_contract_fields(client):
    response = post_raw(client, '{"type": "t"}')
    assert response.status_code == 400
    body = response.json()
    assert list(body) == ["id", "code", "type", "message"]
    assert body["code"] == 400
    assert body["type"] == "InvalidPayload"
    assert "payload" in body["message"]


# --- unexpected failures ------------------------------------------------------------------

SECRET = "boom-7f3a: SELECT password FROM auth_user; /srv/app/events/services.py"


def _assert_no_leak(response: Any) -> None:
    text = response.content.decode()
    for leak in ("boom-7f3a", "SELECT", "Traceback", "RuntimeError", "services.py", 'File "'):
        assert leak not in text, text


def test_unexpected_exception_in_a_view_is_500_internal_without_details(
    client, monkeypatch, caplog
):
    def explode(**kwargs: Any) -> None:
        raise RuntimeError(SECRET)

    monkeypatch.setattr("events.views.event_create", explode)
    with caplog.at_level(logging.ERROR):
        response = client.post(EVENTS, {"type": "t", "payload": {}}, format="json")
    body = assert_error(response, 500, "Internal")
    assert response["Content-Type"] == "application/json"
    _assert_no_leak(response)
    assert Event.objects.count() == 0
    # The same id is logged server-side, with the detail the client does not see.
    logged = [r for r in caplog.records if body["id"] in r.getMessage()]
    assert logged, [r.getMessage() for r in caplog.records]
    assert any(r.exc_info and SECRET in str(r.exc_info[1]) for r in logged)


def test_unexpected_exception_outside_drf_is_500_internal_json(monkeypatch):
    def explode(self: Any, request: Any) -> Any:
        raise RuntimeError(SECRET)

    monkeypatch.setattr(middleware.RejectNulMiddleware, "__call__", explode)
    response = APIClient(raise_request_exception=False).get("/healthz")
    assert_error(response, 500, "Internal")
    assert response["Content-Type"] == "application/json"
    _assert_no_leak(response)
