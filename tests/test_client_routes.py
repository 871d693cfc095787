"""Requests exactly as the official npm clients (`@botpress/client`,
`@botpress/chat`) send them, where they differ from what the other tests
send: the chat client's `GET {apiUrl}/hello/` with a trailing slash, tag
filters written `tags.<key>=<value>` (qs with `allowDots`), and a DELETE
that carries a JSON `{}` body. `clients/` runs the clients themselves
against a live service."""

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bots.models import Role
from events.models import Event, EventStatus
from tests.conftest import admin_api, assert_error, runtime_api
from tests.factories import (
    BotFactory,
    ChatConnectionFactory,
    ConversationFactory,
    EventFactory,
    FileFactory,
    MessageFactory,
    ParticipantFactory,
    UserFactory,
    member_token,
    user_key,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def runtime(bot) -> Any:
    return runtime_api(member_token(bot.workspace, Role.DEVELOPER), bot.id)


# --- GET {chat_url}/{webhookId}/hello/ ----------------------------------------------


@pytest.mark.parametrize("path", ["hello", "hello/"])
def test_hello_with_or_without_the_trailing_slash(api_client, bot, path):
    connection = ChatConnectionFactory(bot=bot)
    response = api_client.get(f"/chat/{connection.webhook_id}/{path}")
    assert response.status_code == 200, response.content
    assert "code" not in response.json()  # the chat client reads a `code` as an error


def test_hello_slash_answers_browsers_from_other_origins(api_client, bot):
    connection = ChatConnectionFactory(bot=bot)
    url = f"/chat/{connection.webhook_id}/hello/"
    origin = "https://shop.example.com"
    preflight = api_client.options(
        url, HTTP_ORIGIN=origin, HTTP_ACCESS_CONTROL_REQUEST_METHOD="GET"
    )
    assert preflight.status_code == 200, preflight.content
    assert preflight["Access-Control-Allow-Origin"] in ("*", origin)
    answer = api_client.get(url, HTTP_ORIGIN=origin)
    assert answer.status_code == 200
    assert answer["Access-Control-Allow-Origin"] in ("*", origin)


def test_hello_slash_of_an_unknown_webhook_is_404(api_client, db):
    assert_error(api_client.get(f"/chat/{uuid.uuid4()}/hello/"), 404, "ResourceNotFound")


def test_hello_slash_serves_only_get(api_client, bot):
    connection = ChatConnectionFactory(bot=bot)
    response = api_client.post(f"/chat/{connection.webhook_id}/hello/", {}, format="json")
    assert_error(response, 405, "MethodNotFound")


@pytest.mark.parametrize("path", ["hello//", "hello/x", "users/"])
def test_other_slashes_are_still_404(api_client, bot, path):
    connection = ChatConnectionFactory(bot=bot)
    assert_error(api_client.get(f"/chat/{connection.webhook_id}/{path}"), 404, "ResourceNotFound")


# --- tags.<key>=<value> -------------------------------------------------------------


def ids_of(response: Any, items: str) -> list[str]:
    assert response.status_code == 200, response.content
    return [item["id"] for item in response.json()[items]]


def test_files_filtered_by_dotted_tags(runtime, bot):
    en_faq = FileFactory(bot=bot, tags={"lang": "en", "kind": "faq"})
    en_doc = FileFactory(bot=bot, tags={"lang": "en", "kind": "doc"})
    FileFactory(bot=bot, tags={"lang": "fr", "kind": "faq"})
    assert set(ids_of(runtime.get("/v1/files", {"tags.lang": "en"}), "files")) == {
        en_faq.id,
        en_doc.id,
    }
    both = runtime.get("/v1/files", {"tags.lang": "en", "tags.kind": "faq"})
    assert ids_of(both, "files") == [en_faq.id]
    mixed = runtime.get("/v1/files", {"tags[lang]": "en", "tags.kind": "doc"})
    assert ids_of(mixed, "files") == [en_doc.id]
    assert ids_of(runtime.get("/v1/files", {"tags.lang": "de"}), "files") == []


def test_a_dotted_tag_key_may_hold_dots(runtime, bot):
    dotted = FileFactory(bot=bot, tags={"app.env": "prod"})
    FileFactory(bot=bot, tags={"app": "prod"})
    assert ids_of(runtime.get("/v1/files", {"tags.app.env": "prod"}), "files") == [dotted.id]


def test_a_tag_given_in_both_forms_is_invalid_query(runtime, bot):
    FileFactory(bot=bot, tags={"lang": "en"})
    response = runtime.get("/v1/files", {"tags[lang]": "en", "tags.lang": "en"})
    error = assert_error(response, 400, "InvalidQuery")
    assert "tags.lang" in error["message"] or "tags[lang]" in error["message"]


def test_a_dotted_tag_given_twice_is_invalid_query(runtime, bot):
    response = runtime.get("/v1/files", {"tags.lang": ["en", "fr"]})
    error = assert_error(response, 400, "InvalidQuery")
    assert "tags.lang" in error["message"]


@pytest.mark.parametrize("name", ["tags.", "tags[]", "tags"])
def test_what_names_no_tag_is_ignored(runtime, bot, name):
    file = FileFactory(bot=bot, tags={"lang": "en"})
    assert ids_of(runtime.get("/v1/files", {name: "en"}), "files") == [file.id]


def test_admin_bots_filtered_by_dotted_tags(workspace):
    prod = BotFactory(workspace=workspace, tags={"env": "prod"})
    BotFactory(workspace=workspace, tags={"env": "dev"})
    client = admin_api(member_token(workspace, Role.DEVELOPER), workspace.id)
    assert ids_of(client.get("/v1/admin/bots", {"tags.env": "prod"}), "bots") == [prod.id]


def test_runtime_chat_lists_filtered_by_dotted_tags(runtime, bot):
    user = UserFactory(bot=bot, tags={"plan": "pro"})
    UserFactory(bot=bot, tags={"plan": "free"})
    conversation = ConversationFactory(bot=bot, tags={"team": "sales"})
    ConversationFactory(bot=bot, tags={"team": "support"})
    ParticipantFactory(conversation=conversation, user=user)
    reply = MessageFactory(bot=bot, conversation=conversation, user=user, tags={"kind": "reply"})
    MessageFactory(bot=bot, conversation=conversation, user=user, tags={"kind": "q"})

    users = runtime.get("/v1/chat/users", {"tags.plan": "pro"})
    assert ids_of(users, "users") == [user.id]
    conversations = runtime.get("/v1/chat/conversations", {"tags.team": "sales"})
    assert ids_of(conversations, "conversations") == [conversation.id]
    messages = runtime.get(
        "/v1/chat/messages", {"conversationId": conversation.id, "tags.kind": "reply"}
    )
    assert ids_of(messages, "messages") == [reply.id]


def test_a_dotted_tag_filter_holds_across_pages(runtime, bot):
    tagged = [FileFactory(bot=bot, key=f"t{index}.txt", tags={"set": "a"}) for index in range(5)]
    FileFactory(bot=bot, key="other.txt", tags={"set": "b"})
    seen: list[str] = []
    query: dict[str, Any] = {"tags.set": "a", "pageSize": 2}
    while True:
        body = runtime.get("/v1/files", query).json()
        seen += [file["id"] for file in body["files"]]
        if "nextToken" not in body["meta"]:
            break
        query = {**query, "nextToken": body["meta"]["nextToken"]}
    assert sorted(seen) == sorted(file.id for file in tagged)


# --- DELETE with a JSON {} body ---------------------------------------------------


def test_cancel_with_the_clients_empty_json_body(runtime, bot):
    event = EventFactory(
        bot=bot, status=EventStatus.SCHEDULED, due_at=datetime.now(UTC) + timedelta(hours=1)
    )
    response = runtime.delete(f"/v1/chat/events/scheduled/{event.id}", {}, format="json")
    assert response.status_code == 200, response.content
    assert response.json() == {}
    assert Event.objects.get(id=event.id).status == EventStatus.CANCELED


def test_chat_delete_with_the_clients_empty_json_body(api_client, bot):
    connection = ChatConnectionFactory(bot=bot)
    user = UserFactory(bot=bot)
    conversation = ConversationFactory(bot=bot)
    ParticipantFactory(conversation=conversation, user=user)
    message = MessageFactory(bot=bot, conversation=conversation, user=user)
    response = api_client.delete(
        f"/chat/{connection.webhook_id}/messages/{message.id}",
        {},
        format="json",
        HTTP_X_USER_KEY=user_key(connection, user),
    )
    assert response.status_code == 200, response.content
    assert response.json() == {}
