"""Request rules made exact so that the OpenAPI document can state them
(.ci/schemathesis holds the server to the document): each rule below is one
the server now enforces as the document says, where it used to differ."""

from typing import Any

import pytest
from rest_framework.test import APIClient

from bots.models import Conversation, Role, User
from chat.models import ChatConnection
from events.serializers import SCHEDULE_DELAY_MAX
from platform_site.api.fields import is_http_url
from tests.conftest import assert_error
from tests.factories import (
    ChatConnectionFactory,
    ConversationFactory,
    FileFactory,
    ParticipantFactory,
    UserFactory,
    user_key,
)

pytestmark = pytest.mark.django_db

ULID = "01J" + "0" * 23


def test_participant_ids_count_as_sent(runtime_client):
    """maxItems counts the values sent: repeated or empty ones count too."""
    client = runtime_client(Role.VIEWER)
    same = [f"user_{ULID}"] * 21
    assert_error(
        client.get("/v1/chat/conversations", {"participantIds": same}), 400, "InvalidQuery"
    )
    blanks = [""] * 21
    assert_error(
        client.get("/v1/chat/conversations", {"participantIds": blanks}), 400, "InvalidQuery"
    )
    response = client.get("/v1/chat/conversations", {"participantIds": [""] * 20})
    assert response.status_code == 200, response.content


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/v1/chat/events", "conversationId"),
        ("/v1/chat/events", "userId"),
        ("/v1/chat/messages", "conversationId"),
        ("/v1/chat/users", "conversationId"),
    ],
)
def test_id_filters_are_held_to_their_length_as_sent(runtime_client, path, name):
    """Whitespace is not stripped before the length is checked: 26 characters
    between two spaces are 28, an id of nothing; 36 between two tabs are 38."""
    client = runtime_client(Role.VIEWER)
    response = client.get(path, {name: " " + "x" * 26 + " "})
    assert response.status_code == 200, response.content
    assert_error(client.get(path, {name: "\t" + "x" * 36 + "\t"}), 400, "InvalidQuery")


def test_event_type_filter_is_held_to_its_length_as_sent(runtime_client):
    client = runtime_client(Role.VIEWER)
    assert_error(client.get("/v1/chat/events", {"type": " " * 201}), 400, "InvalidQuery")


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/hook",
        "http://localhost:8080/hook?x=1#f",
        "http://127.0.0.1:99999/",
        "https://a.b.c.d.example.co/x",
        "https://my-bot.my-namespace.svc.cluster.local:8080/hook",
        "http://[::1]:8080/",  # IPv6
        "http://[2001:db8::8a2e:370:7334]/",
        "http://[2001:0db8:0000:0000:0000:ff00:0042:8329]:443/x",
    ],
)
def test_http_urls_of_the_documented_pattern(url):
    assert is_http_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://user:secret@example.com/",  # credentials in the URL
        "http://[::g]:8080/",  # not an IPv6 address
        "http://[.DeC7]:65183",  # nor this (the pattern once took it)
        "http://[1::2::3]/",
        "http://[::ffff:192.0.2.1]/",  # an embedded IPv4 address: write it as IPv4
        "https://a.b.c.d.e.example.com/",  # six labels before the top-level one
        f"https://{'a' * 40}.example.com/",  # a label over 32 characters
        "https://bücher.example/",  # a Unicode host: send it as xn--…
        "https://example.com/café",  # a non-ASCII path: percent-encode it
        "https://example.com./",  # the root's trailing dot
        "https://a.b.c.d.e.f.g.h.i.j.k.example.com/",  # eleven labels before the top-level one
        "https://example",  # no top-level domain
        "ftp://example.com/",
    ],
)
def test_urls_outside_the_documented_pattern_are_refused(admin_client, url):
    assert not is_http_url(url)
    response = admin_client(Role.OWNER).post("/v1/admin/bots", {"webhookUrl": url}, format="json")
    assert "webhookUrl" in assert_error(response, 400, "InvalidPayload")["message"]


def test_a_blank_or_null_webhook_url_still_clears_it(admin_client):
    client = admin_client(Role.OWNER)
    for value in ("", None):
        response = client.post("/v1/admin/bots", {"webhookUrl": value}, format="json")
        assert response.status_code == 201, response.content


@pytest.fixture
def chat(bot) -> ChatConnection:
    return ChatConnectionFactory(bot=bot)


def test_picture_url_is_held_to_the_pattern(chat):
    response = APIClient().post(
        f"/chat/{chat.webhook_id}/users",
        {"pictureUrl": "http://me:pw@example.com/a.png"},
        format="json",
    )
    assert "pictureUrl" in assert_error(response, 400, "InvalidPayload")["message"]


def test_passage_source_url_is_held_to_the_pattern(runtime_client, bot):
    file = FileFactory(bot=bot)
    body = {"passages": [{"content": "x", "meta": {"sourceUrl": "https://u:p@example.com/"}}]}
    response = runtime_client(Role.DEVELOPER).put(
        f"/v1/files/{file.id}/passages", body, format="json"
    )
    assert "sourceUrl" in assert_error(response, 400, "InvalidPayload")["message"]


@pytest.mark.parametrize(
    ("content_type", "accepted"),
    [
        ("text/plain", True),
        ("text/plain; charset=utf-8", True),
        ("text/plain;\tcharset=utf-8", True),
        ('text/plain; name="a b"', True),
        ("text/plain;\u00a0charset=utf-8", False),  # not RFC 9110's whitespace
        ("text/plain\n", False),
        ("text", False),
    ],
)
def test_content_type_is_a_media_type(runtime_client, file_storage, content_type, accepted):
    body = {"key": "a.txt", "size": 1, "contentType": content_type}
    response = runtime_client(Role.DEVELOPER).put("/v1/files", body, format="json")
    if accepted:
        assert response.status_code == 200, response.content
    else:
        assert "contentType" in assert_error(response, 400, "InvalidPayload")["message"]


def test_file_size_over_the_limit_says_so(runtime_client, settings):
    body = {"key": "a.txt", "size": settings.FILE_UPLOAD_MAX_SIZE + 1}
    response = runtime_client(Role.DEVELOPER).put("/v1/files", body, format="json")
    message = assert_error(response, 400, "InvalidPayload")["message"]
    assert f"at most {settings.FILE_UPLOAD_MAX_SIZE} bytes" in message


def test_a_schedule_delay_is_at_most_a_hundred_years(runtime_client):
    client = runtime_client(Role.DEVELOPER)
    for delay, status in ((SCHEDULE_DELAY_MAX, 201), (SCHEDULE_DELAY_MAX + 1, 400)):
        body: dict[str, Any] = {"type": "t", "payload": {}, "schedule": {"delay": delay}}
        assert client.post("/v1/chat/events", body, format="json").status_code == status


@pytest.mark.parametrize("schedule", [{}, {"delay": 1, "dateTime": "2030-01-01T00:00:00Z"}])
def test_a_schedule_takes_exactly_one_of_its_fields(runtime_client, schedule):
    body = {"type": "t", "payload": {}, "schedule": schedule}
    response = runtime_client(Role.DEVELOPER).post("/v1/chat/events", body, format="json")
    message = assert_error(response, 400, "InvalidPayload")["message"]
    assert "Give exactly one of dateTime or delay." in message


@pytest.fixture
def conversation(bot) -> Conversation:
    return ConversationFactory(bot=bot)


@pytest.fixture
def author(bot, conversation) -> User:
    user = UserFactory(bot=bot)
    ParticipantFactory(conversation=conversation, user=user)
    return user


@pytest.mark.parametrize(
    "tags",
    [
        {"": None},  # a name of no characters, even left out
        {"k" * 101: ""},
        {f"t{n}": None for n in range(51)},  # 51 tags, even all left out
    ],
)
def test_removable_tags_are_checked_as_sent(runtime_client, conversation, author, tags):
    body = {
        "conversationId": conversation.id,
        "userId": author.id,
        "payload": {"type": "text", "text": "hi"},
        "tags": tags,
    }
    response = runtime_client(Role.DEVELOPER).post(
        "/v1/chat/messages/get-or-create", body, format="json"
    )
    assert "tags" in assert_error(response, 400, "InvalidPayload")["message"]


def test_removing_the_owner_of_a_conversation_is_forbidden(bot, chat):
    owner = UserFactory(bot=bot, chat_id="owner")
    conversation = ConversationFactory(bot=bot, chat_id="room", owner=owner)
    ParticipantFactory(conversation=conversation, user=owner)
    client = APIClient()
    client.credentials(HTTP_X_USER_KEY=user_key(chat, owner))
    response = client.delete(f"/chat/{chat.webhook_id}/conversations/room/participants/owner")
    assert "owns" in assert_error(response, 403, "Forbidden")["message"]
