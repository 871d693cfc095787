"""The routes the official webchat (@botpress/webchat over
@botpress/webchat-client) calls under {chat_url}/{clientId}/ beyond what
@botpress/chat calls: users/key with the admin secret, the request headers it
sends across origins, and the page that runs it for a bot's end users."""

import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from django.contrib.staticfiles import finders
from django.urls import reverse
from rest_framework.test import APIClient

from bots.models import User
from chat.models import ChatConnection, MessageFeedback
from events.models import Event
from files.models import File
from tests.conftest import assert_error
from tests.factories import (
    AccountFactory,
    ChatConnectionFactory,
    ConversationFactory,
    MessageFactory,
    ParticipantFactory,
    UserFactory,
    user_key,
)

pytestmark = pytest.mark.django_db

STATIC = Path(__file__).resolve().parent.parent / "chat" / "static" / "webchat"


@pytest.fixture
def connection(bot) -> ChatConnection:
    return ChatConnectionFactory(bot=bot)


def base(connection: ChatConnection) -> str:
    return f"/chat/{connection.webhook_id}"


def admin(connection: ChatConnection) -> APIClient:
    return APIClient(HTTP_X_ADMIN_SECRET=connection.encryption_key)


# --- POST users/key -------------------------------------------------------------------


def test_the_admin_secret_has_a_key_made_that_the_chat_accepts(connection):
    UserFactory(bot=connection.bot, chat_id="visitor-7", name="Ada")
    response = admin(connection).post(
        f"{base(connection)}/users/key", {"id": "visitor-7"}, format="json"
    )
    assert response.status_code == 200, response.content
    [key] = response.json().values()
    assert jwt.decode(key, connection.encryption_key, algorithms=["HS256"]) == {"id": "visitor-7"}
    me = APIClient(HTTP_X_USER_KEY=key).get(f"{base(connection)}/users/me")
    assert me.status_code == 200, me.content
    assert me.json()["user"]["name"] == "Ada"


def test_a_key_made_with_an_expiry_is_refused_once_it_passed(connection):
    UserFactory(bot=connection.bot, chat_id="visitor-7")
    soon = int(time.time() * 1000) + 60_000
    response = admin(connection).post(
        f"{base(connection)}/users/key", {"id": "visitor-7", "expiresAt": soon}, format="json"
    )
    key = response.json()["key"]
    claims = jwt.decode(key, connection.encryption_key, algorithms=["HS256"])
    assert claims == {"id": "visitor-7", "exp": soon // 1000}
    expired = jwt.encode(
        {"id": "visitor-7", "exp": int(time.time()) - 1}, connection.encryption_key, "HS256"
    )
    refused = APIClient(HTTP_X_USER_KEY=expired).get(f"{base(connection)}/users/me")
    assert_error(refused, 401, "Unauthorized")


@pytest.mark.parametrize(
    ("headers", "status", "kind"),
    [
        ({}, 401, "Unauthorized"),
        ({"HTTP_X_ADMIN_SECRET": "not-the-secret"}, 401, "Unauthorized"),
    ],
)
def test_users_key_needs_the_chat_s_admin_secret(connection, headers, status, kind):
    response = APIClient(**headers).post(
        f"{base(connection)}/users/key", {"id": "visitor-7"}, format="json"
    )
    assert_error(response, status, kind)
    assert response.headers["WWW-Authenticate"] == 'AdminSecret header="x-admin-secret"'


def test_another_chat_s_secret_is_not_this_chat_s(connection, bot):
    other = ChatConnectionFactory(bot=bot)
    response = admin(other).post(
        f"{base(connection)}/users/key", {"id": "visitor-7"}, format="json"
    )
    assert_error(response, 401, "Unauthorized")


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"id": "no spaces"},
        {"id": "visitor-7", "expiresAt": "tomorrow"},
        {"id": "visitor-7", "expiresAt": 1000},  # 1970: already past
        {"id": "visitor-7", "expiresAt": 10**16},
        {"id": "visitor-7", "extra": True},
    ],
)
def test_a_users_key_body_that_breaks_the_rules_is_400(connection, body: dict[str, Any]):
    response = admin(connection).post(f"{base(connection)}/users/key", body, format="json")
    assert_error(response, 400, "InvalidPayload")


def test_users_key_of_an_unknown_chat_is_404(connection):
    response = admin(connection).post("/chat/nope/users/key", {"id": "visitor-7"}, format="json")
    assert_error(response, 404, "ResourceNotFound")


# --- across origins -------------------------------------------------------------------


def test_a_browser_may_send_the_webchat_s_headers_from_any_origin(connection):
    response = APIClient().options(
        f"{base(connection)}/initialize",
        HTTP_ORIGIN="https://shop.example",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="GET",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="x-user-key,timeout,x-admin-secret",
    )
    assert response.status_code in (200, 204), response.content
    allowed = {h.strip() for h in response.headers["Access-Control-Allow-Headers"].split(",")}
    assert {"x-user-key", "timeout", "x-admin-secret"} <= allowed


# --- the page: {chat_url}/{webhookId}/webchat -----------------------------------------


def page_config(html: str) -> dict[str, Any]:
    start = html.index('<script id="webchat-config" type="application/json">')
    body = html[html.index(">", start) + 1 : html.index("</script>", start)]
    return json.loads(body)


def test_the_webchat_page_runs_the_bundled_webchat_against_this_chat(connection, settings):
    response = APIClient().get(f"{base(connection)}/webchat")
    assert response.status_code == 200
    html = response.content.decode()
    assert page_config(html) == {
        "apiUrl": settings.CHAT_URL,
        "clientId": connection.webhook_id,
        "botName": connection.bot.name,
        "feedbackEnabled": True,
        "allowFileUpload": True,
    }
    assert "/static/webchat/webchat.js" in html and "/static/webchat/webchat.css" in html
    # It loads nothing from another site: scripts only from here.
    policy = dict(
        directive.strip().split(" ", 1)
        for directive in response["Content-Security-Policy"].split(";")
    )
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == "'self'"


def test_the_webchat_page_of_an_unknown_chat_is_404(connection):
    assert_error(APIClient().get("/chat/nope/webchat"), 404, "ResourceNotFound")


def test_the_webchat_page_is_read_only(connection):
    response = APIClient().post(f"{base(connection)}/webchat")
    assert_error(response, 405, "MethodNotFound")
    assert response["Allow"] == "GET, HEAD"


def test_the_bundle_the_page_loads_is_served(connection):
    for name in ("webchat.js", "webchat.css"):
        assert (STATIC / name).stat().st_size > 10_000, name
    assert finders.find("webchat/webchat.js")


def test_the_bot_s_admin_page_links_its_webchat_pages(connection, client):
    client.force_login(AccountFactory(is_staff=True, is_superuser=True))
    response = client.get(reverse("admin:bots_bot_change", args=[connection.bot_id]))
    assert response.status_code == 200
    assert f'href="/chat/{connection.webhook_id}/webchat"' in response.content.decode()


# --- POST events with bindConversation / bindUser --------------------------------------


@pytest.fixture
def visitor(connection) -> tuple[APIClient, Any]:
    """A user of the chat with its key, in a conversation of their own."""
    user = UserFactory(bot=connection.bot, chat_id="visitor-7")
    conversation = ConversationFactory(bot=connection.bot, chat_id="room-1", owner=user)
    ParticipantFactory(conversation=conversation, user=user)
    return APIClient(HTTP_X_USER_KEY=user_key(connection, user)), conversation


def test_the_webchat_s_conversation_started_event_is_linked_by_default(connection, visitor):
    client, conversation = visitor
    body = {"conversationId": "room-1", "payload": {"type": "conversation_started", "data": {}}}
    response = client.post(f"{base(connection)}/events", body, format="json")
    assert response.status_code == 201, response.content
    event = response.json()["event"]
    assert (event["conversationId"], event["userId"]) == ("room-1", "visitor-7")
    stored = Event.objects.get(id=event["id"])
    assert (stored.conversation_id, stored.user.chat_id) == (conversation.id, "visitor-7")


@pytest.mark.parametrize(
    ("bindings", "linked"),
    [
        ({"bindConversation": False}, "user"),
        ({"bindUser": False}, "conversation"),
        ({"bindConversation": False, "bindUser": False}, None),
    ],
)
def test_an_event_left_unbound_is_not_linked_to_its_conversation_or_user(
    connection, visitor, bindings, linked
):
    client, _ = visitor
    body = {"conversationId": "room-1", "payload": {"type": "custom", "data": {}}, **bindings}
    response = client.post(f"{base(connection)}/events", body, format="json")
    assert response.status_code == 201, response.content
    event = response.json()["event"]
    # The answer says where it was sent, as the webchat's type has it.
    assert (event["conversationId"], event["userId"]) == ("room-1", "visitor-7")
    stored = Event.objects.get(id=event["id"])
    assert (stored.conversation_id is not None, stored.user_id is not None) == (
        linked == "conversation",
        linked == "user",
    )
    # Only an event of the conversation's user is the chat interface's to show.
    read = client.get(f"{base(connection)}/events/{event['id']}")
    assert_error(read, 404, "ResourceNotFound")


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_a_binding_that_is_not_a_boolean_is_400(connection, visitor, value):
    client, _ = visitor
    body = {"conversationId": "room-1", "payload": {}, "bindUser": value}
    response = client.post(f"{base(connection)}/events", body, format="json")
    assert_error(response, 400, "InvalidPayload")
    assert not Event.objects.exists()


# --- PUT users/me with userData ------------------------------------------------------


def test_user_data_is_stored_shown_and_cleared(connection, visitor):
    client, _ = visitor
    me = f"{base(connection)}/users/me"
    data = {"plan": "pro", "cart": {"items": 3}}
    response = client.put(me, {"userData": data, "name": "Ada"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["user"]["data"] == data
    assert client.get(me).json()["user"]["data"] == data
    assert User.objects.get(bot=connection.bot, chat_id="visitor-7").data == data
    # Another change leaves it; null clears it.
    assert client.put(me, {"name": "Ada L."}, format="json").json()["user"]["data"] == data
    cleared = client.put(me, {"userData": None}, format="json").json()["user"]
    assert "data" not in cleared
    assert User.objects.get(bot=connection.bot, chat_id="visitor-7").data is None


def test_signed_user_data_is_read_with_the_chat_s_key(connection, visitor):
    client, _ = visitor
    token = jwt.encode({"plan": "pro"}, connection.encryption_key, algorithm="HS256")
    response = client.put(f"{base(connection)}/users/me", {"userData": token}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["user"]["data"] == {"plan": "pro"}


@pytest.mark.parametrize(
    "user_data",
    [
        pytest.param([1, 2], id="a list"),
        pytest.param(7, id="a number"),
        pytest.param({"blob": "x" * 9000}, id="over 8 KiB"),
        pytest.param(
            jwt.encode({"plan": "pro"}, "another key of this chat, 32 bytes", algorithm="HS256"),
            id="foreign",
        ),
        pytest.param("not a token", id="not a token"),
        pytest.param(
            jwt.encode({"b": "x" * 9000}, "k" * 32, algorithm="HS256"), id="big, unsigned"
        ),
    ],
)
def test_user_data_that_breaks_the_rules_is_400_and_changes_nothing(connection, visitor, user_data):
    client, _ = visitor
    body = {"name": "Changed", "userData": user_data}
    response = client.put(f"{base(connection)}/users/me", body, format="json")
    assert_error(response, 400, "InvalidPayload")
    assert User.objects.get(bot=connection.bot, chat_id="visitor-7").name != "Changed"


def test_signed_user_data_over_the_limit_is_400(connection, visitor):
    client, _ = visitor
    token = jwt.encode({"blob": "x" * 9000}, connection.encryption_key, algorithm="HS256")
    response = client.put(f"{base(connection)}/users/me", {"userData": token}, format="json")
    body = assert_error(response, 400, "InvalidPayload")
    assert "8192 bytes" in body["message"]


# --- PUT / DELETE messages/{id}/feedback -----------------------------------------------


@pytest.fixture
def bot_message(connection, visitor) -> Any:
    _, conversation = visitor
    bot_user = UserFactory(bot=connection.bot, chat_id="the-bot")
    return MessageFactory(conversation=conversation, user=bot_user, is_bot=True)


def feedback_url(connection: ChatConnection, message_id: str) -> str:
    return f"{base(connection)}/messages/{message_id}/feedback"


def test_feedback_is_stored_shown_and_told_to_the_bot(connection, visitor, bot_message):
    client, conversation = visitor
    url = feedback_url(connection, bot_message.id)
    body = {"value": "negative", "comment": "Not what I asked"}
    response = client.put(url, body, format="json")
    assert (response.status_code, response.json()) == (200, {})
    shown = client.get(f"{base(connection)}/messages/{bot_message.id}").json()["message"]
    assert shown["feedback"] == {"value": "negative", "comment": "Not what I asked"}
    listed = client.get(f"{base(connection)}/conversations/room-1/messages").json()["messages"]
    assert listed[0]["feedback"] == {"value": "negative", "comment": "Not what I asked"}
    # Changed, then taken back: one row, an event for each change.
    assert client.put(url, {"value": "positive"}, format="json").status_code == 200
    assert MessageFeedback.objects.get().value == "positive"
    assert client.delete(url).status_code == 200
    assert not MessageFeedback.objects.exists()
    assert (
        "feedback"
        not in client.get(f"{base(connection)}/messages/{bot_message.id}").json()["message"]
    )
    told = Event.objects.filter(type="message_feedback").order_by("id")
    assert [event.payload for event in told] == [
        {"messageId": bot_message.id, "value": "negative", "comment": "Not what I asked"},
        {"messageId": bot_message.id, "value": "positive"},
        {"messageId": bot_message.id, "value": None},
    ]
    assert {(e.conversation_id, e.user.chat_id, e.message_id) for e in told} == {
        (conversation.id, "visitor-7", bot_message.id)
    }


def test_feedback_on_one_s_own_message_is_403(connection, visitor):
    client, conversation = visitor
    own = MessageFactory(conversation=conversation, user=conversation.owner)
    response = client.put(feedback_url(connection, own.id), {"value": "positive"}, format="json")
    assert_error(response, 403, "Forbidden")
    assert not MessageFeedback.objects.exists()


def test_feedback_on_a_message_of_another_user_s_conversation_is_refused(
    connection, visitor, bot_message
):
    stranger = UserFactory(bot=connection.bot, chat_id="eve")
    client = APIClient(HTTP_X_USER_KEY=user_key(connection, stranger))
    response = client.put(
        feedback_url(connection, bot_message.id), {"value": "positive"}, format="json"
    )
    assert_error(response, 403, "Forbidden")
    unknown = client.put(
        feedback_url(connection, "msg_01JZZZZZZZZZZZZZZZZZZZZZZZ"),
        {"value": "positive"},
        format="json",
    )
    assert_error(unknown, 404, "ResourceNotFound")
    assert not MessageFeedback.objects.exists() and not Event.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"value": "meh"},
        {"value": "positive", "comment": "x" * 1001},
        {"value": "positive", "x": 1},
    ],
)
def test_feedback_that_breaks_the_rules_is_400(connection, visitor, bot_message, body):
    client, _ = visitor
    response = client.put(feedback_url(connection, bot_message.id), body, format="json")
    assert_error(response, 400, "InvalidPayload")
    assert not MessageFeedback.objects.exists()


def test_taking_back_feedback_never_given_is_404(connection, visitor, bot_message):
    client, _ = visitor
    assert_error(client.delete(feedback_url(connection, bot_message.id)), 404, "ResourceNotFound")


def test_staff_read_feedback_in_the_django_admin(connection, visitor, bot_message, client):
    api, _ = visitor
    api.put(
        feedback_url(connection, bot_message.id),
        {"value": "negative", "comment": "Slow"},
        format="json",
    )
    client.force_login(AccountFactory(is_staff=True, is_superuser=True))
    page = client.get(reverse("admin:chat_messagefeedback_changelist"))
    assert page.status_code == 200
    assert "Slow" in page.content.decode()


# --- PUT messages/{id} -----------------------------------------------------------------


def test_a_user_changes_a_message_they_sent(connection, visitor, bot_message):
    client, conversation = visitor
    sent = client.post(
        f"{base(connection)}/messages",
        {"conversationId": "room-1", "payload": {"type": "text", "text": "helo"}},
        format="json",
    ).json()["message"]
    url = f"{base(connection)}/messages/{sent['id']}"
    body = {"payload": {"type": "text", "text": "hello"}, "metadata": {"edited": True}}
    response = client.put(url, body, format="json")
    assert response.status_code == 200, response.content
    message = response.json()["message"]
    assert (message["payload"]["text"], message["metadata"]) == ("hello", {"edited": True})
    assert client.get(url).json()["message"]["payload"]["text"] == "hello"
    # Another type of payload is another message; the bot's are not the user's.
    changed_type = {"payload": {"type": "image", "imageUrl": "https://example.com/a.png"}}
    assert_error(client.put(url, changed_type, format="json"), 400, "InvalidPayload")
    assert_error(client.put(url, {"tags": {}}, format="json"), 400, "InvalidPayload")
    theirs = f"{base(connection)}/messages/{bot_message.id}"
    assert_error(client.put(theirs, {"metadata": {}}, format="json"), 403, "Forbidden")


# --- POST files ------------------------------------------------------------------------


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 56


def path_of(url: str) -> str:
    return "/" + url.split("://", 1)[1].split("/", 1)[1]


def test_a_user_s_file_is_uploaded_read_by_its_url_and_is_the_bot_s(connection, visitor):
    client, _ = visitor
    body = {"key": "photo.png", "size": len(PNG), "contentType": "image/png"}
    response = client.post(f"{base(connection)}/files", body, format="json")
    assert response.status_code == 201, response.content
    made = response.json()["file"]
    assert made["key"] == "webchat/visitor-7/photo.png"
    assert made["status"] == "upload_pending" and made["index"] is False
    assert made["accessPolicies"] == ["public_content"]
    assert made["tags"] == {"webchat:userId": "visitor-7"}
    # The webchat puts the url in its message before the upload ends.
    assert made["url"].startswith("http") and made["uploadUrl"].startswith("http")

    put = APIClient().put(
        path_of(made["uploadUrl"]),
        data=PNG,
        content_type="image/png",
        HTTP_X_AMZ_TAGGING="public=true",
    )
    assert put.status_code == 200, put.content
    download = APIClient().get(path_of(made["url"]))
    assert download.status_code == 200
    assert b"".join(download.streaming_content) == PNG
    stored = File.objects.get(id=made["id"])
    assert (stored.bot_id, stored.status) == (connection.bot_id, "upload_completed")


def test_users_files_of_the_same_name_are_each_their_own(connection, visitor):
    client, _ = visitor
    other = UserFactory(bot=connection.bot, chat_id="visitor-8")
    theirs = APIClient(HTTP_X_USER_KEY=user_key(connection, other))
    body = {"key": "a.txt", "size": 3}
    first = client.post(f"{base(connection)}/files", body, format="json").json()["file"]
    second = theirs.post(f"{base(connection)}/files", body, format="json").json()["file"]
    assert first["id"] != second["id"]
    assert File.objects.count() == 2


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"key": "a.txt", "size": 10 * 1024 * 1024 + 1}, id="over the limit"),
        pytest.param({"key": "a.txt", "size": 3, "index": True}, id="indexed"),
        pytest.param({"key": "", "size": 3}, id="no key"),
        pytest.param({"key": "a.txt", "size": -1}, id="negative size"),
        pytest.param({"key": "a.txt", "size": 3, "contentType": "png"}, id="not a media type"),
        pytest.param(
            {"key": "a.txt", "size": 3, "expiresAt": "2001-01-01T00:00:00.000Z"}, id="past"
        ),
        pytest.param({"key": "a.txt", "size": 3, "metadata": {}}, id="unknown field"),
    ],
)
def test_a_file_that_breaks_the_rules_is_400_and_makes_nothing(connection, visitor, body):
    client, _ = visitor
    response = client.post(f"{base(connection)}/files", body, format="json")
    assert_error(response, 400, "InvalidPayload")
    assert not File.objects.exists()


def test_files_need_a_user_key(connection):
    response = APIClient().post(f"{base(connection)}/files", {"key": "a", "size": 1}, format="json")
    assert_error(response, 401, "Unauthorized")


def test_a_browser_may_upload_from_any_origin(connection):
    response = APIClient().options(
        "/v1/uploads/any-token",
        HTTP_ORIGIN="https://shop.example",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="PUT",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="content-type,x-amz-tagging",
    )
    assert response.status_code in (200, 204), response.content
    allowed = {h.strip() for h in response.headers["Access-Control-Allow-Headers"].split(",")}
    assert {"content-type", "x-amz-tagging"} <= allowed
