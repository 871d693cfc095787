"""POST /v1/chat/messages: how a bot replies. The body, its references, the
bot message it stores, the live stream it feeds, and the role matrix."""

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection

import chat.services.messages
from bots.models import Bot, Conversation, Message, Role, User
from chat.live.bus import conversation_channel, live_bus
from chat.message_payloads import PAYLOAD_TYPES
from events.models import Event
from tests.conftest import assert_error
from tests.conftest import runtime_api as runtime
from tests.factories import (
    BotFactory,
    ConversationFactory,
    MembershipFactory,
    ParticipantFactory,
    UserFactory,
    WorkspaceFactory,
    token_for,
)

pytestmark = pytest.mark.django_db

URL = "/v1/chat/messages"
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
MESSAGE_KEYS = {
    "id",
    "createdAt",
    "updatedAt",
    "type",
    "payload",
    "direction",
    "userId",
    "conversationId",
    "tags",
}
BUILDERS = ["owner", "administrator", "manager", "developer"]
TEXT = {"type": "text", "text": "Hello from the bot"}


@pytest.fixture
def conversation(bot: Bot) -> Conversation:
    """A conversation whose chat id was chosen in the chat interface."""
    return ConversationFactory(bot=bot, chat_id="support-1", tags={"chat:id": "support-1"})


@pytest.fixture
def author(bot: Bot, conversation: Conversation) -> User:
    """The user that stands for the bot in the conversation."""
    user = UserFactory(bot=bot, chat_id="the-bot", tags={"chat:id": "the-bot"})
    ParticipantFactory(conversation=conversation, user=user)
    return user


def body_for(conversation: Conversation, author: User, **fields: Any) -> dict[str, Any]:
    return {"conversationId": conversation.id, "userId": author.id, "payload": TEXT, **fields}


def post(client: Any, body: Any) -> Any:
    return client.post(URL, body, format="json")


def created(response: Any) -> dict[str, Any]:
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {"message"}
    return body["message"]


def refused(response: Any, error_type: str, *named: str) -> dict[str, Any]:
    """A 400 of `error_type` whose message names each of `named`; nothing written."""
    body = assert_error(response, 400, error_type)
    for name in named:
        assert name in body["message"], body["message"]
    assert Message.objects.count() == 0
    return body


# --- creating ---------------------------------------------------------------------------


def test_create_answers_the_runtime_message(runtime_client, bot, conversation, author):
    message = created(post(runtime_client(), body_for(conversation, author, tags={"k": "v"})))
    assert set(message) == MESSAGE_KEYS
    assert message["id"].startswith("msg_") and 28 <= len(message["id"]) <= 36
    assert TIMESTAMP.match(message["createdAt"]) and TIMESTAMP.match(message["updatedAt"])
    assert message["type"] == "text"
    assert message["payload"] == TEXT
    assert message["direction"] == "outgoing"
    # Runtime ids, never the chat ids the chat interface shows.
    assert message["conversationId"] == conversation.id
    assert message["userId"] == author.id
    assert message["tags"] == {"k": "v"}


def test_the_message_is_a_bot_message_of_the_bot(runtime_client, bot, conversation, author):
    message = created(post(runtime_client(), body_for(conversation, author)))
    row = Message.objects.get(id=message["id"])
    assert row.is_bot is True
    assert (row.bot_id, row.conversation_id, row.user_id) == (bot.id, conversation.id, author.id)
    assert (row.type, row.payload, row.tags, row.metadata) == ("text", TEXT, {}, None)


def test_a_bot_message_is_no_event_for_the_bot(runtime_client, conversation, author):
    created(post(runtime_client(), body_for(conversation, author)))
    assert Event.objects.count() == 0


def test_the_conversation_is_updated_with_the_message(runtime_client, conversation, author):
    before = conversation.updated_at
    message = created(post(runtime_client(), body_for(conversation, author)))
    conversation.refresh_from_db()
    assert conversation.updated_at > before
    assert conversation.updated_at == Message.objects.get(id=message["id"]).created_at


def test_the_author_need_not_take_part(runtime_client, bot, conversation):
    outsider = UserFactory(bot=bot)
    message = created(post(runtime_client(), body_for(conversation, outsider)))
    assert message["userId"] == outsider.id


def test_the_bot_may_write_as_itself(runtime_client, bot, conversation):
    """Hosted-API bots reply with `userId: ctx.botId`: the author is then a
    user standing for the bot, made once and reused."""
    client = runtime_client()
    first = created(
        post(client, {**body_for(conversation, UserFactory(bot=bot)), "userId": bot.id})
    )
    second = created(
        post(client, {**body_for(conversation, UserFactory(bot=bot)), "userId": bot.id})
    )
    assert first["userId"] == second["userId"]
    self_user = User.objects.get(id=first["userId"])
    assert (self_user.bot_id, self_user.chat_id, self_user.name) == (
        bot.id,
        f"bot:{bot.id}",
        bot.name,
    )


def test_another_bots_id_is_no_author(runtime_client, bot, conversation, author):
    other = BotFactory(workspace=bot.workspace)
    refused(
        post(runtime_client(), body_for(conversation, author, userId=other.id)),
        "ReferenceNotFound",
        "userId",
    )
    assert not User.objects.filter(chat_id=f"bot:{other.id}").exists()


def test_get_answers_what_create_answered(runtime_client, conversation, author):
    client = runtime_client()
    message = created(post(client, body_for(conversation, author)))
    response = client.get(f"{URL}/{message['id']}")
    assert response.status_code == 200, response.content
    assert response.json() == {"message": message}


# --- type beside or inside the payload ------------------------------------------------


def test_type_beside_the_payload_as_the_hosted_apis_clients_send_it(
    runtime_client, conversation, author
):
    body = body_for(conversation, author, type="text", payload={"text": "hi"})
    message = created(post(runtime_client(), body))
    assert message["type"] == "text"
    # The type is kept inside the payload too, as the chat interface shows payloads.
    assert message["payload"] == {"type": "text", "text": "hi"}
    assert Message.objects.get().payload == {"type": "text", "text": "hi"}


def test_type_beside_and_inside_when_they_agree(runtime_client, conversation, author):
    message = created(post(runtime_client(), body_for(conversation, author, type="text")))
    assert message["payload"] == TEXT


def test_type_that_disagrees_with_the_payload(runtime_client, conversation, author):
    body = body_for(conversation, author, type="markdown")
    refused(post(runtime_client(), body), "InvalidPayload", "type", "payload.type", "markdown")


def test_no_type_anywhere(runtime_client, conversation, author):
    body = body_for(conversation, author, payload={"text": "hi"})
    refused(post(runtime_client(), body), "InvalidPayload", "payload.type")


@pytest.mark.parametrize("kind", ["sticker", "", "TEXT", 5, None])
def test_unknown_type_beside_the_payload(runtime_client, conversation, author, kind):
    body = body_for(conversation, author, type=kind, payload={"text": "hi"})
    body = refused(post(runtime_client(), body), "InvalidPayload", "type")
    assert "payload" not in body["message"]


def test_field_errors_of_a_payload_typed_beside_it_name_the_payload(
    runtime_client, conversation, author
):
    body = body_for(conversation, author, type="location", payload={"latitude": "north"})
    refused(post(runtime_client(), body), "InvalidPayload", "payload.latitude", "payload.longitude")


# --- every payload type ---------------------------------------------------------------

CARD = {
    "type": "card",
    "title": "A card",
    "subtitle": "Sub",
    "imageUrl": "https://example.com/a.png",
    "actions": [
        {"action": "postback", "label": "Yes", "value": "yes"},
        {"action": "url", "label": "Site", "value": "https://example.com"},
        {"action": "say", "label": "Hi", "value": "hi"},
    ],
}
PAYLOADS = {
    "text": {"type": "text", "text": "Hello"},
    "markdown": {"type": "markdown", "markdown": "**Hello**"},
    "image": {"type": "image", "imageUrl": "https://example.com/a.png"},
    "audio": {"type": "audio", "audioUrl": "https://example.com/a.mp3"},
    "video": {"type": "video", "videoUrl": "https://example.com/a.mp4"},
    "file": {"type": "file", "fileUrl": "https://example.com/a.pdf", "title": "A"},
    "location": {"type": "location", "latitude": 45.5, "longitude": -73.6, "address": "Here"},
    "card": CARD,
    "choice": {"type": "choice", "text": "Pick", "options": [{"label": "A", "value": "a"}]},
    "dropdown": {"type": "dropdown", "text": "Pick", "options": [{"label": "B", "value": "b"}]},
    "carousel": {"type": "carousel", "items": [CARD, {"title": "Untyped", "actions": []}]},
    "bloc": {
        "type": "bloc",
        "items": [
            {"type": "text", "payload": {"text": "wrapped"}},
            {"type": "image", "imageUrl": "https://example.com/flat.png"},
        ],
    },
}
# (payload, what the error names): a required field missing, a field of a wrong type
BAD_PAYLOADS = [
    ({"type": "text"}, "payload.text"),
    ({"type": "text", "text": 1}, "payload.text"),
    ({"type": "image", "imageUrl": ["x"]}, "payload.imageUrl"),
    ({"type": "location", "latitude": 1}, "payload.longitude"),
    ({"type": "location", "latitude": True, "longitude": 1}, "payload.latitude"),
    ({"type": "card", "title": "T"}, "payload.actions"),
    ({"type": "choice", "text": "Pick", "options": [{"value": "a"}]}, "payload.options[0].label"),
    ({"type": "carousel", "items": "cards"}, "payload.items"),
    ({"type": "bloc", "items": [{"type": "text", "text": 5}]}, "payload.items[0].text"),
    ({"type": "text", "text": "hi", "color": "red"}, "payload.color"),
    ({"type": "sticker"}, "payload.type"),
]


def test_the_payload_table_is_covered():
    assert sorted(PAYLOADS) == sorted(PAYLOAD_TYPES)


@pytest.mark.parametrize("kind", sorted(PAYLOADS))
def test_every_payload_type(runtime_client, conversation, author, kind):
    message = created(
        post(runtime_client(), body_for(conversation, author, payload=PAYLOADS[kind]))
    )
    assert (message["type"], message["payload"]) == (kind, PAYLOADS[kind])
    assert Message.objects.get().type == kind


@pytest.mark.parametrize(("payload", "named"), BAD_PAYLOADS)
def test_bad_payload(runtime_client, conversation, author, payload, named):
    refused(
        post(runtime_client(), body_for(conversation, author, payload=payload)),
        "InvalidPayload",
        named,
    )


@pytest.mark.parametrize("payload", ["hello", ["text"], None, 5])
def test_payload_not_an_object(runtime_client, conversation, author, payload):
    refused(
        post(runtime_client(), body_for(conversation, author, payload=payload)),
        "InvalidPayload",
        "payload",
    )


# --- the rest of the body -------------------------------------------------------------


@pytest.mark.parametrize(
    ("tags", "named"),
    [({"k": 1}, "'k'"), (["a"], "tags"), ("k=v", "tags"), ({"": "v"}, "tags")],
)
def test_bad_tags(runtime_client, conversation, author, tags, named):
    body = body_for(conversation, author, tags=tags)
    refused(post(runtime_client(), body), "InvalidPayload", "tags", named)


def test_synthetic_origin_is_kept(runtime_client, conversation, author):
    client = runtime_client()
    message = created(post(client, body_for(conversation, author, origin="synthetic")))
    assert message["origin"] == "synthetic"
    assert client.get(f"{URL}/{message['id']}").json()["message"]["origin"] == "synthetic"


@pytest.mark.parametrize(
    ("origin", "named"),
    [("human", "synthetic"), ("", "synthetic"), (1, "synthetic"), (None, "null")],
)
def test_other_origins_are_refused(runtime_client, conversation, author, origin, named):
    body = body_for(conversation, author, origin=origin)
    refused(post(runtime_client(), body), "InvalidPayload", "origin", named)


def test_unknown_field(runtime_client, conversation, author):
    body = body_for(conversation, author, metadata={"a": 1})
    refused(post(runtime_client(), body), "InvalidPayload", "metadata")


@pytest.mark.parametrize("field", ["conversationId", "userId", "payload"])
def test_missing_field(runtime_client, conversation, author, field):
    body = body_for(conversation, author)
    del body[field]
    refused(post(runtime_client(), body), "InvalidPayload", field)


@pytest.mark.parametrize("field", ["conversationId", "userId"])
@pytest.mark.parametrize("value", ["conv_short", "x" * 37, 12, None])
def test_malformed_reference(runtime_client, conversation, author, field, value):
    body = body_for(conversation, author, **{field: value})
    refused(post(runtime_client(), body), "InvalidPayload", field)


@pytest.mark.parametrize("body", [[1, 2], "text", None])
def test_body_not_an_object(runtime_client, body):
    assert_error(post(runtime_client(), body), 400, "InvalidPayload")


def test_body_not_json(runtime_client):
    response = runtime_client().post(URL, data="{nope", content_type="application/json")
    assert_error(response, 400, "InvalidPayload")


# --- references ---------------------------------------------------------------------------


def test_conversation_of_another_bot(runtime_client, bot, author):
    theirs = ConversationFactory(bot=BotFactory(workspace=bot.workspace))
    body = body_for(theirs, author)
    refused(post(runtime_client(), body), "ReferenceNotFound", "conversationId", theirs.id)


def test_user_of_another_bot(runtime_client, bot, conversation):
    theirs = UserFactory(bot=BotFactory(workspace=WorkspaceFactory()))
    body = body_for(conversation, theirs)
    refused(post(runtime_client(), body), "ReferenceNotFound", "userId", theirs.id)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("conversationId", "conv_01J0000000000000000000NONE"),
        ("userId", "user_01J0000000000000000000NONE"),
        ("conversationId", "conv_not-a-ulid-but-long-enough"),
    ],
)
def test_reference_to_nothing(runtime_client, conversation, author, field, value):
    body = body_for(conversation, author, **{field: value})
    refused(post(runtime_client(), body), "ReferenceNotFound", field)


def test_ids_of_the_wrong_kind(runtime_client, conversation, author):
    """A user's id where a conversation's belongs, and the other way round."""
    swapped = body_for(conversation, author)
    swapped["conversationId"], swapped["userId"] = author.id, conversation.id
    refused(post(runtime_client(), swapped), "ReferenceNotFound", "conversationId")


def test_chat_ids_are_not_runtime_ids(runtime_client, conversation, author):
    body = body_for(conversation, author, conversationId="support-1-chosen-by-a-chat-user")
    refused(post(runtime_client(), body), "ReferenceNotFound", "conversationId")


@pytest.mark.django_db(transaction=True)
def test_an_author_deleted_before_the_commit(runtime_client, conversation, author, monkeypatch):
    """A reference deleted between its lookup and the commit is a missing
    reference, not a 500."""
    resolve = chat.services.messages.user_reference_get

    def resolved_then_deleted(**kwargs: Any) -> Any:
        user = resolve(**kwargs)
        User.objects.filter(pk=user.pk).delete()
        return user

    monkeypatch.setattr(chat.services.messages, "user_reference_get", resolved_then_deleted)
    refused(post(runtime_client(), body_for(conversation, author)), "ReferenceNotFound", "deleted")


# --- the live stream ------------------------------------------------------------------------


@pytest.fixture
def in_process_bus(settings) -> None:
    """The in-process bus on either backend: a subscription made on a loop of
    the test's own is simplest there (tests/test_chat_live_redis.py covers Redis)."""
    settings.LIVE_STREAM_REDIS_URL = ""


@contextmanager
def listening(conversation: Conversation) -> Iterator[Callable[[float], list[dict[str, Any]]]]:
    """A subscription to the conversation's channel on the live bus (as a
    listener of GET .../listen holds one); the callable answers what arrived
    within that many seconds."""
    loop = asyncio.new_event_loop()
    subscription = live_bus().subscribe(conversation_channel(conversation.id))
    queue = loop.run_until_complete(subscription.__aenter__())

    async def drain(seconds: float) -> list[dict[str, Any]]:
        arrived = []
        try:
            while True:
                arrived.append(json.loads(await asyncio.wait_for(queue.get(), seconds)))
        except TimeoutError:
            return arrived

    try:
        yield lambda seconds: loop.run_until_complete(drain(seconds))
    finally:
        loop.run_until_complete(subscription.__aexit__(None, None, None))
        loop.close()


@pytest.mark.usefixtures("in_process_bus")
def test_listeners_hear_of_the_message_once_it_commits(
    runtime_client, conversation, author, django_capture_on_commit_callbacks
):
    with listening(conversation) as arrived:
        with django_capture_on_commit_callbacks() as callbacks:
            message = created(post(runtime_client(), body_for(conversation, author)))
        assert arrived(0.2) == []
        for callback in callbacks:
            callback()
        heard = arrived(1)
    # Chat ids, as the chat interface shows them, and isBot.
    assert heard == [
        {
            "type": "message_created",
            "data": {
                "id": message["id"],
                "createdAt": message["createdAt"],
                "payload": TEXT,
                "userId": "the-bot",
                "conversationId": "support-1",
                "isBot": True,
            },
        }
    ]


@pytest.mark.usefixtures("in_process_bus")
def test_a_refused_message_is_not_heard(
    runtime_client, conversation, author, django_capture_on_commit_callbacks
):
    with listening(conversation) as arrived:
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            response = post(runtime_client(), body_for(conversation, author, payload={"type": "x"}))
        assert_error(response, 400, "InvalidPayload")
        assert callbacks == []
        assert arrived(0.2) == []


# --- cost ---------------------------------------------------------------------------------


def test_query_count_of_a_create(runtime_client, conversation, author, django_assert_num_queries):
    client = runtime_client()
    created(post(client, body_for(conversation, author)))  # records the token's first use
    # conversation; user; the message and the conversation's updatedAt, one
    # statement on PostgreSQL (rows_write; in a savepoint elsewhere); the
    # credentials were kept
    with django_assert_num_queries(3 if connection.vendor == "postgresql" else 6):
        created(post(client, body_for(conversation, author)))


# --- roles and tenants ------------------------------------------------------------------------


@pytest.mark.parametrize("role", BUILDERS)
def test_builders_may_create_messages(runtime_client, conversation, author, role):
    created(post(runtime_client(role), body_for(conversation, author)))


@pytest.mark.parametrize("role", ["viewer", "billing"])
def test_viewer_and_billing_may_not(runtime_client, conversation, author, role):
    body = assert_error(
        post(runtime_client(role), body_for(conversation, author)), 403, "Forbidden"
    )
    assert role in body["message"] and "write messages" in body["message"]
    assert Message.objects.count() == 0


@pytest.mark.parametrize("role", ["viewer", "billing"])
def test_forbidden_before_the_body_is_read(runtime_client, role):
    assert_error(post(runtime_client(role), {"bogus": 1}), 403, "Forbidden")


def test_without_credentials(api_client, conversation, author):
    response = api_client.post(URL, body_for(conversation, author), format="json")
    assert_error(response, 401, "Unauthorized")
    assert "WWW-Authenticate" in response.headers


def test_a_bot_of_another_workspace_is_401(bot, conversation, author):
    other = BotFactory(workspace=WorkspaceFactory())
    client = runtime(token_for(MembershipFactory(workspace=bot.workspace).account), other.id)
    assert_error(post(client, body_for(conversation, author)), 401, "Unauthorized")


def test_a_member_of_two_workspaces_writes_to_the_named_bot_only(bot, conversation, author):
    other = BotFactory(workspace=WorkspaceFactory())
    membership = MembershipFactory(workspace=bot.workspace, role=Role.OWNER)
    MembershipFactory(account=membership.account, workspace=other.workspace, role=Role.OWNER)
    # x-bot-id names the other bot: this bot's conversation is no reference there.
    client = runtime(token_for(membership.account), other.id)
    refused(post(client, body_for(conversation, author)), "ReferenceNotFound", "conversationId")
