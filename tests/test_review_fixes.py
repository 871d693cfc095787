"""Inputs found by review that once produced a 500, a wrong answer or a leak."""

import json
import logging

import jwt
import pytest

from bots.models import Role
from chat.keys import user_key_issue
from events.models import Event
from tests.conftest import assert_error
from tests.factories import (
    BotFactory,
    ChatConnectionFactory,
    ConversationFactory,
    FileFactory,
    ParticipantFactory,
    PassageFactory,
)

pytestmark = pytest.mark.django_db

EVENT = json.dumps({"type": "t", "payload": {}})


@pytest.mark.parametrize("charset", ["base64", "rot13", "hex", "zlib"])
def test_a_charset_that_is_no_text_encoding_is_400(runtime_client, charset):
    response = runtime_client().generic(
        "POST", "/v1/chat/events", EVENT, content_type=f"application/json; charset={charset}"
    )
    body = assert_error(response, 400, "InvalidPayload")
    assert "Error" not in body["message"]
    assert Event.objects.count() == 0


def test_an_integer_too_long_to_read_says_so_without_python_words(runtime_client):
    raw = '{"type": "t", "payload": {"n": ' + "9" * 5000 + "}}"
    response = runtime_client().generic(
        "POST", "/v1/chat/events", raw, content_type="application/json"
    )
    body = assert_error(response, 400, "InvalidPayload")
    assert "sys." not in body["message"]


def test_a_chunked_body_is_refused_with_a_clear_message(runtime_client):
    response = runtime_client().generic(
        "POST",
        "/v1/chat/events",
        EVENT,
        content_type="application/json",
        HTTP_TRANSFER_ENCODING="chunked",
    )
    body = assert_error(response, 411, "InvalidPayload")
    assert "Content-Length" in body["message"]


def test_a_body_that_is_not_an_object_is_named_in_json_words(runtime_client):
    response = runtime_client().post("/v1/chat/events", [1, 2], format="json")
    body = assert_error(response, 400, "InvalidPayload")
    assert "an array" in body["message"]


@pytest.fixture
def chat(api_client):
    connection = ChatConnectionFactory()
    participant = ParticipantFactory(conversation=ConversationFactory(bot=connection.bot))
    key = user_key_issue(connection=connection, chat_user_id=participant.user.chat_id)
    api_client.credentials(HTTP_X_USER_KEY=key)
    return api_client, connection, participant


@pytest.mark.parametrize("kind", [[1], {"a": 1}, 3, None])
def test_a_bloc_item_whose_type_is_not_a_string_is_400(chat, kind):
    client, connection, participant = chat
    response = client.post(
        f"/chat/{connection.webhook_id}/messages",
        {
            "conversationId": participant.conversation.chat_id,
            "payload": {"type": "bloc", "items": [{"type": kind}]},
        },
        format="json",
    )
    assert_error(response, 400, "InvalidPayload")


@pytest.mark.parametrize("user_id", ["\ud800", "a\x00b", "tab\there"])
def test_a_key_naming_an_unstorable_id_is_401(api_client, user_id):
    connection = ChatConnectionFactory()
    key = jwt.encode({"id": user_id}, connection.encryption_key, algorithm="HS256")
    response = api_client.post(
        f"/chat/{connection.webhook_id}/messages",
        {"conversationId": "c", "payload": {"type": "text", "text": "x"}},
        format="json",
        HTTP_X_USER_KEY=key,
    )
    assert_error(response, 401, "Unauthorized")


def test_a_delay_of_zero_is_pending(runtime_client):
    response = runtime_client().post(
        "/v1/chat/events", {"type": "t", "payload": {}, "schedule": {"delay": 0}}, format="json"
    )
    assert response.json()["event"]["status"] == "pending"


def test_limit_wins_over_a_bad_page_size(runtime_client, bot):
    file = FileFactory(bot=bot)
    PassageFactory.create_batch(8, file=file)
    response = runtime_client().get(f"/v1/files/{file.id}/passages", {"limit": 5, "pageSize": 500})
    assert response.status_code == 200, response.content
    assert len(response.json()["passages"]) == 5


@pytest.mark.parametrize("param", ["limit", "pageSize"])
def test_an_empty_page_size_is_400(runtime_client, bot, param):
    file = FileFactory(bot=bot)
    response = runtime_client().get(f"/v1/files/{file.id}/passages", {param: ""})
    assert_error(response, 400, "InvalidQuery")


def test_an_empty_next_token_is_the_first_page(runtime_client, bot):
    file = FileFactory(bot=bot)
    for position in range(3):
        PassageFactory(file=file, position=position)
    response = runtime_client().get(f"/v1/files/{file.id}/passages", {"nextToken": ""})
    assert [p["meta"]["position"] for p in response.json()["passages"]] == [0, 1, 2]


def test_a_file_id_wins_over_a_key_that_spells_it(runtime_client, bot):
    target = FileFactory(bot=bot)
    PassageFactory(file=target, content="by id")
    impostor = FileFactory(bot=bot, key=target.id)
    PassageFactory(file=impostor, content="by key")
    response = runtime_client().get(f"/v1/files/{target.id}/passages")
    assert [p["content"] for p in response.json()["passages"]] == ["by id"]


def test_a_bots_token_of_a_filtered_list_is_refused_on_another(admin_client, workspace):
    BotFactory.create_batch(3, workspace=workspace, dev=True)
    client = admin_client()
    token = client.get("/v1/admin/bots", {"dev": "true", "pageSize": 1}).json()["meta"]["nextToken"]
    response = client.get("/v1/admin/bots", {"pageSize": 1, "nextToken": token})
    assert_error(response, 400, "InvalidQuery")
    response = client.get("/v1/admin/bots", {"dev": "true", "pageSize": 1, "nextToken": token})
    assert response.status_code == 200


def test_head_is_held_to_the_role_matrix(runtime_client, admin_client, bot):
    file = FileFactory(bot=bot)
    response = runtime_client(Role.BILLING).head(f"/v1/files/{file.id}/passages")
    assert response.status_code == 403
    assert admin_client(Role.BILLING).head("/v1/admin/bots").status_code == 403
    assert runtime_client(Role.VIEWER).head(f"/v1/files/{file.id}/passages").status_code == 200


def test_options_is_not_served_on_the_api(runtime_client):
    response = runtime_client(Role.BILLING).options("/v1/chat/events")
    assert_error(response, 405, "MethodNotFound")


def test_the_openapi_document_is_json(api_client):
    response = api_client.get("/v1/openapi.json")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/vnd.oai.openapi+json")
    assert "/v1/chat/events" in response.json()["paths"]


def test_a_client_error_id_is_in_the_log(api_client, caplog):
    with caplog.at_level(logging.INFO, logger="platform_site.errors"):
        body = api_client.get("/v1/admin/bots").json()
    assert body["id"] in caplog.text


def test_readyz_names_no_exception_class(api_client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    body = assert_error(api_client.get("/readyz"), 503, "Unavailable")
    assert "Error" not in body["message"]
