"""GET {chat_url}/{clientId}/initialize, the official webchat's start, in
process through the ASGI application (as tests/test_chat_live.py drives the
live stream): a browser without a key gets a user, a key and a conversation;
with them it resumes; `init` comes first, then the conversation's news."""

from typing import Any

import jwt
import pytest
from rest_framework.test import APIClient

from bots.models import Conversation, Participant, User
from chat.live.publish import stream_publish
from chat.live.stream import PING
from chat.models import MessageFeedback, UserKeyMode
from tests import test_chat_live as live
from tests.conftest import assert_error
from tests.factories import MessageFactory, UserFactory
from tests.test_chat_live import Chat, Exchange, ServerLoop

# The live stream's fixtures: an event loop as a server's, a conversation
# whose chat id holds a `/` with its owner and a guest, the in-process bus.
server = live.server
chat = live.chat
in_process_bus = live.in_process_bus

pytestmark = pytest.mark.django_db(transaction=True)


def initialize(
    server: ServerLoop, chat: Chat, *, key: str | None = None, conversation: str | None = None
) -> Exchange:
    path = f"{chat.base}/initialize"
    if conversation is not None:
        path += f"?conversationId={conversation}"
    headers = {"timeout": "60000"} | ({"x-user-key": key} if key else {})
    return Exchange(server, path, headers=headers)


def started(exchange: Exchange) -> dict[str, Any]:
    """The `init` data of a stream that answered 200."""
    status, headers = exchange.start()
    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    first = exchange.event()
    assert first["type"] == "init", first
    return first["data"]


def test_a_browser_without_a_key_gets_a_user_a_key_and_a_conversation(server, chat):
    init = started(initialize(server, chat))

    user = User.objects.get(bot=chat.bot, chat_id=init["user"]["id"])
    key = init["user"].pop("userKey")
    claims = jwt.decode(key, chat.connection.encryption_key, algorithms=["HS256"])
    assert claims == {"id": user.chat_id}
    conversation = Conversation.objects.get(bot=chat.bot, chat_id=init["conversation"]["id"])
    assert conversation.owner_id == user.id
    assert Participant.objects.filter(conversation=conversation, user=user).exists()
    assert init["messages"] == []
    assert [participant["id"] for participant in init["participants"]] == [user.chat_id]
    assert set(init["user"]) == {"id", "createdAt", "updatedAt"}
    # The key it was given works on every other route.
    me = APIClient(HTTP_X_USER_KEY=key).get(f"{chat.base}/users/me")
    assert me.json()["user"]["id"] == user.chat_id


def test_a_browser_resumes_its_conversation_and_hears_what_comes_next(server, chat):
    older = MessageFactory(conversation=chat.conversation, user=chat.owner)
    newer = MessageFactory(conversation=chat.conversation, user=chat.guest)
    key = chat.key(chat.owner)
    exchange = initialize(server, chat, key=key, conversation=chat.conversation.chat_id)
    init = started(exchange)

    assert init["conversation"]["id"] == "team/support-1"
    assert [message["id"] for message in init["messages"]] == [newer.id, older.id]
    assert {participant["id"] for participant in init["participants"]} == {"alice", "bob"}
    assert init["user"]["id"] == "alice" and init["user"]["userKey"] == key
    assert Conversation.objects.filter(bot=chat.bot).count() == 1

    stream_publish(conversation_id=chat.conversation.id, type="custom", data={"n": 1})
    assert exchange.event() == {"type": "custom", "data": {"n": 1}}
    exchange.hang_up()


def test_a_key_without_a_conversation_starts_a_new_one(server, chat):
    init = started(initialize(server, chat, key=chat.key(chat.guest)))
    assert init["conversation"]["id"] != chat.conversation.chat_id
    assert [participant["id"] for participant in init["participants"]] == ["bob"]


def test_the_stream_pings_after_init(server, chat, settings):
    settings.LIVE_STREAM_HEARTBEAT = 0.2
    exchange = initialize(server, chat, key=chat.key(chat.owner))
    started(exchange)
    assert exchange.chunk() == PING
    exchange.hang_up()


# --- refusals, in the live stream's order ---------------------------------------------


def test_an_unknown_chat_is_404(server, chat):
    answer = Exchange(server, "/chat/nope/initialize", headers={}).answer()
    assert_error(answer, 404, "ResourceNotFound")


def test_a_method_other_than_get_is_405(server, chat):
    answer = Exchange(server, f"{chat.base}/initialize", method="POST", headers={}).answer()
    assert_error(answer, 405, "MethodNotFound")
    assert answer.headers["allow"] == "GET"


def test_a_bad_key_is_401_and_makes_nothing(server, chat):
    users = User.objects.count()
    answer = initialize(server, chat, key="not-a-key").answer()
    assert_error(answer, 401, "Unauthorized")
    assert User.objects.count() == users


def test_a_chat_whose_operator_signs_keys_makes_no_user(server, chat):
    chat.connection.user_key_mode = UserKeyMode.MANUAL
    chat.connection.save(update_fields=["user_key_mode"])
    users = User.objects.count()
    assert_error(initialize(server, chat).answer(), 401, "Unauthorized")
    assert User.objects.count() == users


def test_a_malformed_conversation_id_is_400(server, chat):
    answer = initialize(server, chat, key=chat.key(chat.owner), conversation="no%20spaces").answer()
    assert_error(answer, 400, "InvalidIdentifier")


def test_a_conversation_that_is_gone_is_replaced_by_a_new_one(server, chat):
    # The webchat keeps the id it was given: refused, it would wait forever.
    exchange = initialize(server, chat, key=chat.key(chat.owner), conversation="deleted-since")
    init = started(exchange)
    assert init["conversation"]["id"] not in ("deleted-since", chat.conversation.chat_id)
    assert Conversation.objects.filter(bot=chat.bot, owner=chat.owner).count() == 2
    exchange.hang_up()


def test_another_user_s_conversation_is_403(server, chat):
    stranger = UserFactory(bot=chat.bot, chat_id="eve")
    answer = initialize(
        server, chat, key=chat.key(stranger), conversation=chat.conversation.chat_id
    ).answer()
    assert_error(answer, 403, "Forbidden")


def test_init_shows_the_feedback_the_user_gave(server, chat):
    answer = MessageFactory(conversation=chat.conversation, user=chat.guest)
    MessageFeedback.objects.create(message=answer, user=chat.owner, value="positive")
    exchange = initialize(
        server, chat, key=chat.key(chat.owner), conversation=chat.conversation.chat_id
    )
    [message] = started(exchange)["messages"]
    assert message["feedback"] == {"value": "positive"}
    exchange.hang_up()


def test_an_empty_conversation_id_is_400(server, chat):
    # Absent, a conversation is made; given, it must be one.
    answer = initialize(server, chat, key=chat.key(chat.owner), conversation="").answer()
    assert_error(answer, 400, "InvalidIdentifier")
