"""GET /v1/chat/messages, conversations and users, one and many: runtime
shapes, filters, keyset pages, tenant scoping and the role matrix."""

from dataclasses import dataclass
from typing import Any

import pytest

from bots.models import Bot, Conversation, Message, Role, User
from tests.conftest import assert_error
from tests.conftest import runtime_api as runtime
from tests.factories import (
    BotFactory,
    ConversationFactory,
    MembershipFactory,
    MessageFactory,
    ParticipantFactory,
    UserFactory,
    WorkspaceFactory,
    member_token,
    token_for,
)

pytestmark = pytest.mark.django_db

READERS = ["owner", "administrator", "manager", "developer", "viewer"]


def ulid_id(prefix: str, n: int) -> str:
    """An id of that kind whose ULID sorts by `n` (so rows are made in a known order)."""
    return f"{prefix}_01J{n:023d}"


@dataclass
class World:
    """Two conversations of the bot with their users and messages, oldest first."""

    bot: Bot
    alice: User
    bob: User
    support: Conversation
    sales: Conversation
    messages: list[Message]


@pytest.fixture
def world(bot: Bot) -> World:
    alice = UserFactory(
        bot=bot,
        id=ulid_id("user", 1),
        chat_id="alice",
        name="Alice",
        picture_url="https://example.com/alice.png",
        tags={"chat:id": "alice", "plan": "pro"},
    )
    bob = UserFactory(bot=bot, id=ulid_id("user", 2), tags={"plan": "free"})
    support = ConversationFactory(
        bot=bot, id=ulid_id("conv", 1), chat_id="support-1", tags={"chat:id": "support-1"}
    )
    sales = ConversationFactory(bot=bot, id=ulid_id("conv", 2), tags={"team": "sales"})
    ParticipantFactory(conversation=support, user=alice)
    ParticipantFactory(conversation=support, user=bob)
    ParticipantFactory(conversation=sales, user=bob)
    messages = [
        MessageFactory(bot=bot, conversation=support, user=alice, id=ulid_id("msg", 1)),
        MessageFactory(
            bot=bot,
            conversation=support,
            user=bob,
            id=ulid_id("msg", 2),
            is_bot=True,
            tags={"kind": "reply"},
        ),
        MessageFactory(bot=bot, conversation=sales, user=bob, id=ulid_id("msg", 3)),
        MessageFactory(
            bot=bot, conversation=support, user=alice, id=ulid_id("msg", 4), tags={"kind": "q"}
        ),
    ]
    # Another bot's, in the same workspace: never seen through this bot.
    sibling = BotFactory(workspace=bot.workspace)
    MessageFactory(
        conversation=ConversationFactory(bot=sibling, id=ulid_id("conv", 9)),
        user=UserFactory(bot=sibling, id=ulid_id("user", 9)),
        id=ulid_id("msg", 9),
    )
    return World(bot, alice, bob, support, sales, messages)


def get_one(client: Any, url: str, key: str) -> dict[str, Any]:
    response = client.get(url)
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {key}
    return body[key]


def get_list(client: Any, url: str, key: str, query: Any = None) -> dict[str, Any]:
    response = client.get(url, query or {})
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {key, "meta"}
    return body


def ids(client: Any, url: str, key: str, query: Any = None) -> list[str]:
    return [item["id"] for item in get_list(client, url, key, query)[key]]


def walk(client: Any, url: str, key: str, **query: Any) -> list[list[str]]:
    """Every page of a list, following nextToken to the end."""
    pages: list[list[str]] = []
    token = None
    for _ in range(50):
        body = get_list(client, url, key, {**query, **({"nextToken": token} if token else {})})
        pages.append([item["id"] for item in body[key]])
        token = body["meta"].get("nextToken")
        if token is None:
            assert body["meta"] == {}
            return pages
    raise AssertionError("the list never ended")


# --- messages ---------------------------------------------------------------------------


def test_get_message(runtime_client, world):
    first, reply = world.messages[0], world.messages[1]
    message = get_one(runtime_client(), f"/v1/chat/messages/{first.id}", "message")
    assert message == {
        "id": first.id,
        "createdAt": message["createdAt"],
        "updatedAt": message["updatedAt"],
        "type": "text",
        "payload": {"type": "text", "text": "hello"},
        "direction": "incoming",
        "userId": world.alice.id,
        "conversationId": world.support.id,
        "tags": {},
    }
    message = get_one(runtime_client(), f"/v1/chat/messages/{reply.id}", "message")
    assert message["direction"] == "outgoing"
    assert message["tags"] == {"kind": "reply"}


def test_list_messages_newest_first(runtime_client, world):
    expected = [m.id for m in reversed(world.messages)]
    assert ids(runtime_client(), "/v1/chat/messages", "messages") == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"conversationId": ulid_id("conv", 1)}, [4, 2, 1]),
        ({"conversationId": ulid_id("conv", 2)}, [3]),
        ({"tags[kind]": "reply"}, [2]),
        ({"conversationId": ulid_id("conv", 1), "tags[kind]": "q"}, [4]),
        ({"conversationId": ulid_id("conv", 2), "tags[kind]": "q"}, []),
        # Another bot's conversation, and one that does not exist: nothing of this bot.
        ({"conversationId": ulid_id("conv", 9)}, []),
        ({"conversationId": ulid_id("conv", 5)}, []),
        ({"unknownParameter": "ignored"}, [4, 3, 2, 1]),
    ],
)
def test_filter_messages(runtime_client, world, query, expected):
    found = ids(runtime_client(), "/v1/chat/messages", "messages", query)
    assert found == [ulid_id("msg", n) for n in expected]


def test_walk_the_messages_of_a_conversation(runtime_client, world):
    query = {"conversationId": world.support.id, "pageSize": 2}
    pages = walk(runtime_client(), "/v1/chat/messages", "messages", **query)
    assert pages == [[ulid_id("msg", 4), ulid_id("msg", 2)], [ulid_id("msg", 1)]]


# --- one conversation, one user ------------------------------------------------------------


def test_get_conversation(runtime_client, world):
    conversation = get_one(
        runtime_client(), f"/v1/chat/conversations/{world.support.id}", "conversation"
    )
    assert conversation == {
        "id": world.support.id,
        "createdAt": conversation["createdAt"],
        "updatedAt": conversation["updatedAt"],
        # The chat interface's: its one channel, of no integration.
        "channel": "channel",
        "integration": "",
        # The chat id the chat interface shows, as it wrote it.
        "tags": {"chat:id": "support-1"},
    }


def test_get_user(runtime_client, world):
    user = get_one(runtime_client(), f"/v1/chat/users/{world.alice.id}", "user")
    assert user == {
        "id": world.alice.id,
        "createdAt": user["createdAt"],
        "updatedAt": user["updatedAt"],
        "name": "Alice",
        "pictureUrl": "https://example.com/alice.png",
        "tags": {"chat:id": "alice", "plan": "pro"},
    }
    # Optional fields that are not set are left out.
    bob = get_one(runtime_client(), f"/v1/chat/users/{world.bob.id}", "user")
    assert set(bob) == {"id", "createdAt", "updatedAt", "tags"}


GETS = [
    ("messages", "msg"),
    ("conversations", "conv"),
    ("users", "user"),
]


@pytest.mark.parametrize(("route", "prefix"), GETS)
def test_get_of_another_bot_is_404(runtime_client, world, route, prefix):
    response = runtime_client().get(f"/v1/chat/{route}/{ulid_id(prefix, 9)}")
    body = assert_error(response, 404, "ResourceNotFound")
    assert ulid_id(prefix, 9) in body["message"]


@pytest.mark.parametrize(("route", "prefix"), GETS)
def test_get_of_nothing_is_404(runtime_client, world, route, prefix):
    response = runtime_client().get(f"/v1/chat/{route}/{ulid_id(prefix, 7)}")
    assert_error(response, 404, "ResourceNotFound")


@pytest.mark.parametrize(("route", "prefix"), GETS)
@pytest.mark.parametrize(
    "bad",
    ["nope", "evt_01J00000000000000000000001", "{prefix}_short", "{prefix}_01J" + "0" * 23 + "U"],
)
def test_get_of_what_cannot_be_an_id_of_that_kind(runtime_client, world, route, prefix, bad):
    response = runtime_client().get(f"/v1/chat/{route}/{bad.format(prefix=prefix)}")
    assert_error(response, 400, "InvalidIdentifier")


def test_a_chat_id_is_no_runtime_id(runtime_client, world):
    response = runtime_client().get("/v1/chat/conversations/support-1")
    assert_error(response, 400, "InvalidIdentifier")


def test_get_as_a_member_of_both_workspaces_names_the_bot(bot, world):
    other = BotFactory(workspace=WorkspaceFactory())
    membership = MembershipFactory(workspace=bot.workspace, role=Role.VIEWER)
    MembershipFactory(account=membership.account, workspace=other.workspace, role=Role.OWNER)
    client = runtime(token_for(membership.account), other.id)
    assert_error(client.get(f"/v1/chat/users/{world.alice.id}"), 404, "ResourceNotFound")
    assert ids(client, "/v1/chat/users", "users") == []


# --- conversations and users, many ---------------------------------------------------------


def test_list_conversations_newest_first(runtime_client, world):
    found = ids(runtime_client(), "/v1/chat/conversations", "conversations")
    assert found == [world.sales.id, world.support.id]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"tags[chat:id]": "support-1"}, [1]),
        ({"tags[team]": "sales"}, [2]),
        ({"tags[team]": "support"}, []),
        ({"participantIds": ulid_id("user", 1)}, [1]),
        ({"participantIds": ulid_id("user", 2)}, [2, 1]),
        ({"participantIds": [ulid_id("user", 1), ulid_id("user", 2)]}, [1]),
        ({"participantIds[]": [ulid_id("user", 2), ulid_id("user", 1)]}, [1]),
        ({"participantIds": ulid_id("user", 2), "tags[team]": "sales"}, [2]),
        ({"participantIds": ulid_id("user", 9)}, []),
        ({"participantIds": ""}, [2, 1]),
    ],
)
def test_filter_conversations(runtime_client, world, query, expected):
    found = ids(runtime_client(), "/v1/chat/conversations", "conversations", query)
    assert found == [ulid_id("conv", n) for n in expected]


def test_list_users_newest_first(runtime_client, world):
    assert ids(runtime_client(), "/v1/chat/users", "users") == [world.bob.id, world.alice.id]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"conversationId": ulid_id("conv", 1)}, [2, 1]),
        ({"conversationId": ulid_id("conv", 2)}, [2]),
        ({"conversationId": ulid_id("conv", 9)}, []),
        ({"tags[plan]": "pro"}, [1]),
        ({"conversationId": ulid_id("conv", 2), "tags[plan]": "pro"}, []),
    ],
)
def test_filter_users(runtime_client, world, query, expected):
    found = ids(runtime_client(), "/v1/chat/users", "users", query)
    assert found == [ulid_id("user", n) for n in expected]


LISTS = ["/v1/chat/messages", "/v1/chat/conversations", "/v1/chat/users"]


def make_rows(bot: Bot, url: str, count: int, start: int = 1) -> list[str]:
    """`count` rows of the list at `url`, oldest first, ids from `start` on."""
    made = []
    for n in range(start, start + count):
        conversation = ConversationFactory(bot=bot, id=ulid_id("conv", 100 + n))
        user = UserFactory(bot=bot, id=ulid_id("user", 100 + n))
        message = MessageFactory(conversation=conversation, user=user, id=ulid_id("msg", n))
        made.append({"messages": message, "conversations": conversation, "users": user})
    return [row[url.rsplit("/", 1)[1]].id for row in made]


def key_of(url: str) -> str:
    return url.rsplit("/", 1)[1]


@pytest.mark.parametrize("url", LISTS)
def test_pages_show_every_row_once_while_rows_are_added(runtime_client, bot, url):
    made = make_rows(bot, url, 5)
    client = runtime_client()
    first = get_list(client, url, key_of(url), {"pageSize": 2})
    assert [item["id"] for item in first[key_of(url)]] == made[:-3:-1]
    # A row added while paging is newer than the position: it shifts no page.
    make_rows(bot, url, 1, start=50)
    rest = walk(client, url, key_of(url), pageSize=2, nextToken=first["meta"]["nextToken"])
    assert [len(page) for page in rest] == [2, 1]
    seen = [item["id"] for item in first[key_of(url)]] + [i for page in rest for i in page]
    assert seen == made[::-1]


@pytest.mark.parametrize("url", LISTS)
def test_a_tampered_token(runtime_client, bot, url):
    make_rows(bot, url, 3)
    client = runtime_client()
    token = get_list(client, url, key_of(url), {"pageSize": 1})["meta"]["nextToken"]
    for bad in (token[:-1] + ("A" if token[-1] != "A" else "B"), "garbage", token + "x"):
        assert_error(client.get(url, {"nextToken": bad}), 400, "InvalidQuery")


@pytest.mark.parametrize(
    ("url", "other_query"),
    [
        ("/v1/chat/messages", {"tags[x]": "y"}),
        ("/v1/chat/messages", {"conversationId": ulid_id("conv", 101)}),
        ("/v1/chat/conversations", {"tags[x]": "y"}),
        ("/v1/chat/conversations", {"participantIds": ulid_id("user", 101)}),
        ("/v1/chat/users", {"conversationId": ulid_id("conv", 101)}),
    ],
)
def test_a_token_of_another_list(runtime_client, bot, url, other_query):
    make_rows(bot, url, 3)
    client = runtime_client()
    token = get_list(client, url, key_of(url), {"pageSize": 1})["meta"]["nextToken"]
    response = client.get(url, {**other_query, "nextToken": token})
    assert_error(response, 400, "InvalidQuery")


def test_a_token_of_another_kind_of_list(runtime_client, bot):
    for n in range(1, 4):
        ConversationFactory(bot=bot, id=ulid_id("conv", n))
    client = runtime_client()
    token = get_list(client, "/v1/chat/conversations", "conversations", {"pageSize": 1})["meta"][
        "nextToken"
    ]
    assert_error(client.get("/v1/chat/users", {"nextToken": token}), 400, "InvalidQuery")


def test_a_token_of_another_bot(runtime_client, bot):
    sibling = BotFactory(workspace=bot.workspace)
    for n in range(1, 4):
        UserFactory(bot=sibling, id=ulid_id("user", n))
    token = get_list(runtime_client(for_bot=sibling), "/v1/chat/users", "users", {"pageSize": 1})[
        "meta"
    ]["nextToken"]
    assert_error(runtime_client().get("/v1/chat/users", {"nextToken": token}), 400, "InvalidQuery")


@pytest.mark.parametrize(
    ("url", "query", "named"),
    [
        ("/v1/chat/messages", {"pageSize": "0"}, "pageSize"),
        ("/v1/chat/users", {"pageSize": "201"}, "pageSize"),
        ("/v1/chat/conversations", {"pageSize": "ten"}, "pageSize"),
        ("/v1/chat/messages", {"conversationId": "conv_short"}, "conversationId"),
        ("/v1/chat/messages", {"conversationId": "c" * 37}, "conversationId"),
        ("/v1/chat/users", {"conversationId": "conv_short"}, "conversationId"),
        ("/v1/chat/conversations", {"participantIds": "user_short"}, "participantIds"),
        (
            "/v1/chat/conversations",
            {"participantIds[]": [ulid_id("user", 1), "u" * 37]},
            "participantIds",
        ),
        (
            "/v1/chat/conversations",
            {"participantIds": [ulid_id("user", n) for n in range(21)]},
            "participantIds",
        ),
        ("/v1/chat/users", {"tags[plan]": ["a", "b"]}, "tags[plan]"),
    ],
)
def test_malformed_query(runtime_client, world, url, query, named):
    body = assert_error(runtime_client().get(url, query), 400, "InvalidQuery")
    assert named in body["message"], body["message"]


# --- cost -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "query"),
    [
        ("/v1/chat/messages", {"conversationId": ulid_id("conv", 1), "tags[kind]": "q"}),
        ("/v1/chat/messages", {}),
        ("/v1/chat/conversations", {"participantIds": [ulid_id("user", 1), ulid_id("user", 2)]}),
        ("/v1/chat/users", {"conversationId": ulid_id("conv", 1), "tags[plan]": "pro"}),
        ("/v1/chat/messages/" + ulid_id("msg", 1), {}),
        ("/v1/chat/conversations/" + ulid_id("conv", 1), {}),
        ("/v1/chat/users/" + ulid_id("user", 1), {}),
    ],
)
def test_query_count_of_a_read(runtime_client, world, url, query, django_assert_num_queries):
    client = runtime_client()
    client.get(url, query)  # records the token's first use; its credentials are kept
    # the rows
    with django_assert_num_queries(1):
        response = client.get(url, {**query, "pageSize": 1})
    assert response.status_code == 200, response.content


def test_query_count_of_a_later_page(runtime_client, world, django_assert_num_queries):
    client = runtime_client()
    token = get_list(client, "/v1/chat/messages", "messages", {"pageSize": 1})["meta"]["nextToken"]
    with django_assert_num_queries(1):  # the rows (the credentials were kept)
        response = client.get("/v1/chat/messages", {"pageSize": 200, "nextToken": token})
    assert len(response.json()["messages"]) == 3


# --- roles ------------------------------------------------------------------------------------


def routes(world: World) -> list[str]:
    return [
        "/v1/chat/messages",
        f"/v1/chat/messages/{world.messages[0].id}",
        "/v1/chat/conversations",
        f"/v1/chat/conversations/{world.support.id}",
        "/v1/chat/users",
        f"/v1/chat/users/{world.alice.id}",
    ]


@pytest.mark.parametrize("role", READERS)
def test_readers_may_read(runtime_client, world, role):
    client = runtime_client(role)
    for url in routes(world):
        response = client.get(url)
        assert response.status_code == 200, (url, response.content)


def test_billing_may_not_read(runtime_client, world):
    client = runtime_client("billing")
    for url in routes(world):
        body = assert_error(client.get(url), 403, "Forbidden")
        assert "billing" in body["message"] and "read messages" in body["message"]
        assert "Alice" not in body["message"]


def test_billing_gets_403_not_404_or_400(runtime_client, bot):
    client = runtime_client("billing")
    for url in ("/v1/chat/users/nope", "/v1/chat/messages/" + ulid_id("msg", 7)):
        assert_error(client.get(url), 403, "Forbidden")


@pytest.mark.parametrize("role", [role.value for role in Role])
def test_a_bot_of_another_workspace_is_401(world, role):
    other = BotFactory(workspace=WorkspaceFactory())
    client = runtime(member_token(world.bot.workspace, role), other.id)
    for url in routes(world):
        assert_error(client.get(url), 401, "Unauthorized")


@pytest.mark.parametrize(
    ("method", "url"),
    [
        *((method, "/v1/chat/conversations") for method in ("put", "patch", "delete")),
        *((method, "/v1/chat/users/" + ulid_id("user", 1)) for method in ("post", "patch")),
    ],
)
def test_methods_not_served(runtime_client, world, url, method):
    response = getattr(runtime_client(), method)(url, {}, format="json")
    assert_error(response, 405, "MethodNotFound")
