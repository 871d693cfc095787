"""The runtime API's writes on a bot's users and conversations, as
@botpress/client sends them: create, get-or-create (discriminateByTags, and
twins racing), update, delete with what goes with it and what listeners
hear; closed bodies, references, the role matrix and tenants."""

from typing import Any

import pytest
from rest_framework.test import APIClient

from bots.models import Bot, Conversation, Message, Participant, Role, User
from chat.live.bus import conversation_channel
from chat.models import ScheduledMessage
from events.models import Event
from tests.concurrency import at_once
from tests.conftest import assert_error
from tests.conftest import runtime_api as runtime
from tests.factories import (
    BotFactory,
    ChatConnectionFactory,
    ConversationFactory,
    InstallationFactory,
    MessageFactory,
    ParticipantFactory,
    ScheduledMessageFactory,
    UserFactory,
    member_token,
    user_key,
)
from tests.test_chat_publishing import RecordingBus, bus, committed  # noqa: F401
from tests.test_runtime_chat_messages import TIMESTAMP

pytestmark = pytest.mark.django_db

USERS = "/v1/chat/users"
CONVERSATIONS = "/v1/chat/conversations"
USER_KEYS = {"id", "createdAt", "updatedAt", "tags"}
CONVERSATION_KEYS = {"id", "createdAt", "updatedAt", "channel", "integration", "tags"}


def answered(response: Any, status: int, key: str, *extra: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {key, *extra}
    return body


def made(response: Any, key: str) -> dict[str, Any]:
    return answered(response, 201, key)[key]


def got_or_made(response: Any, key: str, *, created: bool) -> dict[str, Any]:
    body = answered(response, 201 if created else 200, key, "meta")
    assert body["meta"] == {"created": created}
    return body[key]


def deleted(response: Any) -> None:
    assert response.status_code == 200, response.content
    assert response.json() == {}


def assert_id(value: str, prefix: str) -> None:
    assert value.startswith(f"{prefix}_") and 28 <= len(value) <= 36


# --- users: create ----------------------------------------------------------------------


def test_create_user_answers_the_runtime_user(runtime_client, bot):
    user = made(runtime_client().post(USERS, {"tags": {"crm": "42"}}, format="json"), "user")
    assert set(user) == USER_KEYS
    assert_id(user["id"], "user")
    assert TIMESTAMP.match(user["createdAt"]) and TIMESTAMP.match(user["updatedAt"])
    assert user["tags"] == {"crm": "42"}
    row = User.objects.get(id=user["id"])
    # Its chat id is its runtime id, as when a chat user chooses none.
    assert (row.bot_id, row.chat_id, row.integration_id) == (bot.id, user["id"], None)
    assert Event.objects.count() == 0


def test_create_user_with_every_field(runtime_client, bot):
    installation = InstallationFactory(bot=bot, integration__name="telegram")
    body = {
        "tags": {"crm": "42"},
        "name": "Ada",
        "pictureUrl": "https://example.com/ada.png",
        "properties": {"plan": "pro"},
        "attributes": {"lang": "en"},
        "integrationName": "telegram",
    }
    user = made(runtime_client().post(USERS, body, format="json"), "user")
    assert {key: user[key] for key in body if key != "integrationName"} == {
        key: value for key, value in body.items() if key != "integrationName"
    }
    assert User.objects.get(id=user["id"]).integration == installation
    assert runtime_client().get(f"{USERS}/{user['id']}").json() == {"user": user}


def test_tags_may_be_left_out(runtime_client):
    assert made(runtime_client().post(USERS, {}, format="json"), "user")["tags"] == {}


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"tags": {"k": 1}}, "tags"),
        ({"tags": {"k": None}}, "tags"),
        ({"properties": ["a"]}, "properties"),
        ({"attributes": {"": "v"}}, "attributes"),
        ({"name": "x" * 201}, "name"),
        ({"name": 5}, "name"),
        ({"pictureUrl": "not a url"}, "pictureUrl"),
        ({"integrationName": ""}, "integrationName"),
        ({"discriminateByTags": ["k"]}, "discriminateByTags"),
        ({"profile": "a chat field"}, "profile"),
    ],
)
def test_create_user_refuses_a_bad_body(runtime_client, body, named):
    response = runtime_client().post(USERS, body, format="json")
    assert named in assert_error(response, 400, "InvalidPayload")["message"]
    assert not User.objects.exists()


def test_an_integration_that_is_not_installed(runtime_client, bot):
    # Installed on another bot only.
    InstallationFactory(bot=BotFactory(workspace=bot.workspace), integration__name="slack")
    response = runtime_client().post(USERS, {"integrationName": "slack"}, format="json")
    assert "integrationName" in assert_error(response, 400, "ReferenceNotFound")["message"]
    assert not User.objects.exists()


# --- users: get-or-create -----------------------------------------------------------------


def get_or_create_user(client: Any, **body: Any) -> Any:
    return client.post(f"{USERS}/get-or-create", body, format="json")


def test_get_or_create_user_makes_then_finds(runtime_client):
    client = runtime_client()
    first = got_or_made(
        get_or_create_user(client, tags={"crm": "42"}, name="Ada"), "user", created=True
    )
    assert first["name"] == "Ada"
    again = got_or_made(
        get_or_create_user(client, tags={"crm": "42"}, name="Eve"), "user", created=False
    )
    # Found as it is: what the body says of a user is for making one.
    assert again == first
    assert User.objects.count() == 1


# (existing tags, requested tags, discriminateByTags, found)
MATCHES = [
    # Without the list, every tag is the same, no more, no less.
    ({"foo": "a", "bar": "b"}, {"foo": "a", "bar": "b"}, None, True),
    ({"foo": "a", "bar": "b"}, {"foo": "a"}, None, False),
    ({"foo": "a"}, {"foo": "a", "bar": "b"}, None, False),
    ({"foo": "a"}, {"foo": "x"}, None, False),
    # With it, the tags named match, the others do not count (the client's example).
    (
        {"foo": "a", "bar": "b", "baz": "c"},
        {"foo": "x", "bar": "b", "baz": "c"},
        ["bar", "baz"],
        True,
    ),
    ({"foo": "a", "bar": "b", "baz": "c"}, {"bar": "b", "baz": "x"}, ["bar", "baz"], False),
    # A named tag absent from both matches; present on one side only, it does not.
    ({"foo": "a"}, {"foo": "a"}, ["foo", "bar"], True),
    ({"foo": "a", "bar": "b"}, {"foo": "a"}, ["foo", "bar"], False),
    ({"foo": "a"}, {"foo": "a", "bar": "b"}, ["foo", "bar"], False),
    ({"foo": "a"}, {}, ["bar"], True),
]


@pytest.mark.parametrize(("existing", "requested", "keys", "found"), MATCHES)
def test_discriminate_by_tags(runtime_client, bot, existing, requested, keys, found):
    user = UserFactory(bot=bot, tags=existing)
    body: dict[str, Any] = {"tags": requested}
    if keys is not None:
        body["discriminateByTags"] = keys
    answer = got_or_made(get_or_create_user(runtime_client(), **body), "user", created=not found)
    assert (answer["id"] == user.id) is found
    if not found:
        assert answer["tags"] == requested


@pytest.mark.parametrize("body", [{"tags": {}}, {}, {"tags": {"a": "1"}, "discriminateByTags": []}])
def test_with_no_tag_to_match_on_a_user_is_always_made(runtime_client, bot, body):
    UserFactory(bot=bot, tags={})
    UserFactory(bot=bot, tags={"a": "1"})
    client = runtime_client()
    first = got_or_made(get_or_create_user(client, **body), "user", created=True)
    second = got_or_made(get_or_create_user(client, **body), "user", created=True)
    assert first["id"] != second["id"]


def test_tags_given_null_or_empty_are_left_out(runtime_client):
    client = runtime_client()
    body = {"tags": {"a": "1", "b": None, "c": ""}, "properties": {"p": "x", "q": None}}
    user = got_or_made(get_or_create_user(client, **body), "user", created=True)
    assert (user["tags"], user["properties"]) == ({"a": "1"}, {"p": "x"})
    found = got_or_made(
        get_or_create_user(client, tags={"a": "1", "z": None}), "user", created=False
    )
    assert found["id"] == user["id"]


def test_the_first_match_is_the_oldest(runtime_client, bot):
    oldest = UserFactory(bot=bot, id="user_01J00000000000000000000001", tags={"k": "v", "x": "1"})
    UserFactory(bot=bot, id="user_01J00000000000000000000002", tags={"k": "v", "x": "2"})
    body = {"tags": {"k": "v"}, "discriminateByTags": ["k"]}
    assert (
        got_or_made(get_or_create_user(runtime_client(), **body), "user", created=False)["id"]
        == oldest.id
    )


def test_another_bots_user_is_never_found(runtime_client, bot):
    UserFactory(bot=BotFactory(workspace=bot.workspace), tags={"k": "v"})
    got_or_made(get_or_create_user(runtime_client(), tags={"k": "v"}), "user", created=True)


def test_get_or_create_refuses_an_integration_not_installed_found_or_not(runtime_client, bot):
    UserFactory(bot=bot, tags={"k": "v"})
    for tags in ({"k": "v"}, {"k": "new"}):
        response = get_or_create_user(runtime_client(), tags=tags, integrationName="nope")
        assert_error(response, 400, "ReferenceNotFound")
    assert User.objects.count() == 1


@pytest.mark.parametrize(
    ("keys", "named"),
    [(["x" * 101], "discriminateByTags"), ("k", "discriminateByTags"), ([1], "discriminateByTags")],
)
def test_bad_discriminate_by_tags(runtime_client, keys, named):
    response = get_or_create_user(runtime_client(), tags={"k": "v"}, discriminateByTags=keys)
    assert named in assert_error(response, 400, "InvalidPayload")["message"]


# --- users: update ---------------------------------------------------------------------------


def put_user(client: Any, user_id: str, body: Any) -> Any:
    return client.put(f"{USERS}/{user_id}", body, format="json")


def test_update_user_sets_merges_and_clears(runtime_client, bot):
    user = UserFactory(
        bot=bot,
        name="Ada",
        picture_url="https://example.com/a.png",
        tags={"keep": "1", "drop": "2", "blank": "3"},
        properties={"p": "1"},
        attributes={"a": "1"},
    )
    body = {
        "tags": {"drop": None, "blank": "", "new": "4", "keep": "1"},
        "name": None,
        "pictureUrl": "https://example.com/b.png",
        "properties": {"p": None, "q": "2"},
        "attributes": {"a": "9"},
    }
    answer = answered(put_user(runtime_client(), user.id, body), 200, "user")["user"]
    assert answer == {
        "id": user.id,
        "createdAt": answer["createdAt"],
        "updatedAt": answer["updatedAt"],
        "tags": {"keep": "1", "new": "4"},
        "pictureUrl": "https://example.com/b.png",
        "properties": {"q": "2"},
        "attributes": {"a": "9"},
    }
    assert answer["updatedAt"] > answer["createdAt"]
    user.refresh_from_db()
    assert (user.name, user.tags) == ("", {"keep": "1", "new": "4"})


def test_update_user_leaves_what_is_not_given(runtime_client, bot):
    user = UserFactory(bot=bot, name="Ada", tags={"k": "v"}, profile="chat profile")
    answer = answered(put_user(runtime_client(), user.id, {}), 200, "user")["user"]
    assert (answer["name"], answer["tags"]) == ("Ada", {"k": "v"})
    user.refresh_from_db()
    assert user.profile == "chat profile"


def test_update_user_to_too_many_tags(runtime_client, bot):
    user = UserFactory(bot=bot, tags={f"k{n}": "v" for n in range(30)})
    body = {"tags": {f"new{n}": "v" for n in range(21)}}
    message = assert_error(put_user(runtime_client(), user.id, body), 400, "InvalidPayload")[
        "message"
    ]
    assert message == "tags: At most 50 tags."
    user.refresh_from_db()
    assert len(user.tags) == 30


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"tags": {"k": 1}}, "tags"),
        ({"name": 5}, "name"),
        ({"integrationName": "telegram"}, "integrationName"),
        ({"discriminateByTags": []}, "discriminateByTags"),
    ],
)
def test_update_user_refuses_a_bad_body(runtime_client, bot, body, named):
    user = UserFactory(bot=bot)
    response = put_user(runtime_client(), user.id, body)
    assert named in assert_error(response, 400, "InvalidPayload")["message"]


# --- users: delete ---------------------------------------------------------------------------


def test_delete_user_with_what_goes_with_it(runtime_client, bot, bus, committed):  # noqa: F811
    alice = UserFactory(bot=bot, chat_id="alice")
    room = ConversationFactory(bot=bot, chat_id="room", owner=alice)
    ParticipantFactory(conversation=room, user=alice)
    MessageFactory(conversation=room, user=alice)
    ScheduledMessageFactory(conversation=room, user=alice)
    deleted(committed(lambda: runtime_client().delete(f"{USERS}/{alice.id}")))
    assert not User.objects.filter(pk=alice.pk).exists()
    assert not Message.objects.exists() and not ScheduledMessage.objects.exists()
    assert not Participant.objects.exists()
    # Their conversation stays, ownerless, and its listeners heard them leave.
    room.refresh_from_db()
    assert room.owner is None
    assert bus.sent == [
        (
            conversation_channel(room.id),
            {
                "type": "participant_removed",
                "data": {"conversationId": "room", "participantId": "alice"},
            },
        )
    ]
    assert_error(runtime_client().get(f"{USERS}/{alice.id}"), 404, "ResourceNotFound")


def test_a_deleted_users_chat_key_is_refused(runtime_client, bot):
    connection = ChatConnectionFactory(bot=bot)
    alice = UserFactory(bot=bot, chat_id="alice")
    key = user_key(connection, alice)
    deleted(runtime_client().delete(f"{USERS}/{alice.id}"))
    response = APIClient(HTTP_X_USER_KEY=key).get(f"/chat/{connection.webhook_id}/users/me")
    assert_error(response, 401, "Unauthorized")


# --- conversations: create -------------------------------------------------------------------


def test_create_conversation_answers_the_runtime_conversation(runtime_client, bot):
    body = {"channel": "dm", "tags": {"thread": "7"}}
    conversation = made(runtime_client().post(CONVERSATIONS, body, format="json"), "conversation")
    assert set(conversation) == CONVERSATION_KEYS
    assert_id(conversation["id"], "conv")
    assert (conversation["channel"], conversation["integration"]) == ("dm", "")
    assert conversation["tags"] == {"thread": "7"}
    row = Conversation.objects.get(id=conversation["id"])
    # Nobody owns it and nobody takes part: the bot adds them.
    assert (row.bot_id, row.chat_id, row.owner_id) == (bot.id, conversation["id"], None)
    assert not Participant.objects.exists()
    assert runtime_client().get(f"{CONVERSATIONS}/{row.id}").json() == {
        "conversation": conversation
    }


def test_create_conversation_of_an_installed_integration(runtime_client, bot):
    installation = InstallationFactory(bot=bot, integration__name="telegram")
    body = {"channel": "group", "integrationName": "telegram", "properties": {"p": "1"}}
    conversation = made(runtime_client().post(CONVERSATIONS, body, format="json"), "conversation")
    assert (conversation["integration"], conversation["properties"]) == ("telegram", {"p": "1"})
    assert Conversation.objects.get().integration == installation
    listed = runtime_client().get(CONVERSATIONS).json()["conversations"]
    assert listed == [conversation]


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({}, "channel"),
        ({"channel": ""}, "channel"),
        ({"channel": "x" * 201}, "channel"),
        ({"channel": 1}, "channel"),
        ({"channel": "dm", "tags": {"k": 5}}, "tags"),
        ({"channel": "dm", "properties": "p"}, "properties"),
        ({"channel": "dm", "id": "conv_chosen"}, "id"),
        ({"channel": "dm", "currentTaskId": "t"}, "currentTaskId"),
    ],
)
def test_create_conversation_refuses_a_bad_body(runtime_client, body, named):
    response = runtime_client().post(CONVERSATIONS, body, format="json")
    assert named in assert_error(response, 400, "InvalidPayload")["message"]
    assert not Conversation.objects.exists()


def test_create_conversation_of_an_integration_not_installed(runtime_client):
    body = {"channel": "dm", "integrationName": "telegram"}
    response = runtime_client().post(CONVERSATIONS, body, format="json")
    assert "telegram" in assert_error(response, 400, "ReferenceNotFound")["message"]
    assert not Conversation.objects.exists()


def test_chat_conversations_are_in_the_chat_channel_of_no_integration(runtime_client, bot):
    connection = ChatConnectionFactory(bot=bot)
    alice = UserFactory(bot=bot, chat_id="alice")
    response = APIClient(HTTP_X_USER_KEY=user_key(connection, alice)).post(
        f"/chat/{connection.webhook_id}/conversations", {}, format="json"
    )
    # The chat interface's answer is as it was.
    assert set(response.json()["conversation"]) == {"id", "createdAt", "updatedAt"}
    conversation = runtime_client().get(CONVERSATIONS).json()["conversations"][0]
    assert (conversation["channel"], conversation["integration"]) == ("channel", "")


# --- conversations: get-or-create ----------------------------------------------------------


def get_or_create_conversation(client: Any, **body: Any) -> Any:
    return client.post(f"{CONVERSATIONS}/get-or-create", body, format="json")


def test_get_or_create_conversation_makes_then_finds(runtime_client):
    client = runtime_client()
    body = {"channel": "dm", "tags": {"thread": "7"}}
    first = got_or_made(get_or_create_conversation(client, **body), "conversation", created=True)
    again = got_or_made(
        get_or_create_conversation(client, **body, properties={"p": "1"}),
        "conversation",
        created=False,
    )
    assert again == first
    assert Conversation.objects.count() == 1


@pytest.mark.parametrize(("existing", "requested", "keys", "found"), MATCHES)
def test_discriminate_conversations_by_tags(runtime_client, bot, existing, requested, keys, found):
    conversation = ConversationFactory(bot=bot, channel="dm", tags=existing)
    body: dict[str, Any] = {"channel": "dm", "tags": requested}
    if keys is not None:
        body["discriminateByTags"] = keys
    answer = got_or_made(
        get_or_create_conversation(runtime_client(), **body), "conversation", created=not found
    )
    assert (answer["id"] == conversation.id) is found


def test_a_conversation_of_another_channel_is_not_found(runtime_client, bot):
    ConversationFactory(bot=bot, channel="group", tags={"thread": "7"})
    body = {"channel": "dm", "tags": {"thread": "7"}}
    answer = got_or_made(
        get_or_create_conversation(runtime_client(), **body), "conversation", created=True
    )
    assert answer["channel"] == "dm"


def test_a_chat_conversation_is_found_by_its_chat_id(runtime_client, bot):
    """A conversation a chat user chose the id of carries it in its tags."""
    room = ConversationFactory(bot=bot, chat_id="support-1", tags={"chat:id": "support-1"})
    body = {"channel": "channel", "tags": {"chat:id": "support-1"}}
    answer = got_or_made(
        get_or_create_conversation(runtime_client(), **body), "conversation", created=False
    )
    assert answer["id"] == room.id


def test_with_no_tag_to_match_on_a_conversation_is_always_made(runtime_client, bot):
    ConversationFactory(bot=bot, channel="dm", tags={})
    client = runtime_client()
    for _ in range(2):
        got_or_made(
            get_or_create_conversation(client, channel="dm", tags={}), "conversation", created=True
        )
    assert Conversation.objects.count() == 3


# --- conversations: update -------------------------------------------------------------------


def test_update_conversation_merges_tags_and_properties(runtime_client, bot):
    conversation = ConversationFactory(
        bot=bot, tags={"keep": "1", "drop": "2"}, properties={"p": "1", "q": "2"}
    )
    body = {"tags": {"drop": "", "new": "3"}, "properties": {"q": None}, "currentTaskId": "task"}
    response = runtime_client().put(f"{CONVERSATIONS}/{conversation.id}", body, format="json")
    answer = answered(response, 200, "conversation")["conversation"]
    assert (answer["tags"], answer["properties"]) == ({"keep": "1", "new": "3"}, {"p": "1"})
    # currentTaskId is the hosted API's deprecated field: taken, and ignored.
    assert "currentTaskId" not in answer
    conversation.refresh_from_db()
    assert conversation.tags == {"keep": "1", "new": "3"}


def test_update_conversation_with_nothing_to_change(runtime_client, bot):
    conversation = ConversationFactory(bot=bot, tags={"k": "v"})
    response = runtime_client().put(f"{CONVERSATIONS}/{conversation.id}", {}, format="json")
    assert answered(response, 200, "conversation")["conversation"]["tags"] == {"k": "v"}


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"channel": "dm"}, "channel"),
        ({"tags": ["k"]}, "tags"),
        ({"currentTaskId": 1}, "currentTaskId"),
    ],
)
def test_update_conversation_refuses_a_bad_body(runtime_client, bot, body, named):
    conversation = ConversationFactory(bot=bot)
    response = runtime_client().put(f"{CONVERSATIONS}/{conversation.id}", body, format="json")
    assert named in assert_error(response, 400, "InvalidPayload")["message"]


# --- conversations: delete -------------------------------------------------------------------


def test_delete_conversation_with_what_goes_with_it(runtime_client, bot, bus, committed):  # noqa: F811
    alice = UserFactory(bot=bot, chat_id="alice")
    bob = UserFactory(bot=bot, chat_id="bob")
    room = ConversationFactory(bot=bot, chat_id="room", owner=alice)
    for user in (alice, bob):
        ParticipantFactory(conversation=room, user=user)
    MessageFactory(conversation=room, user=alice)
    ScheduledMessageFactory(conversation=room, user=bob)
    kept = MessageFactory(conversation=ConversationFactory(bot=bot), user=alice)

    deleted(committed(lambda: runtime_client().delete(f"{CONVERSATIONS}/{room.id}")))

    assert list(Conversation.objects.values_list("pk", flat=True)) == [kept.conversation_id]
    assert list(Message.objects.all()) == [kept]
    assert not ScheduledMessage.objects.exists() and not Participant.objects.exists()
    assert User.objects.count() == 2
    # What the chat interface's delete sends: each participant removed.
    assert sorted(message["data"]["participantId"] for _, message in bus.sent) == ["alice", "bob"]
    assert {channel for channel, _ in bus.sent} == {conversation_channel(room.id)}
    assert {message["type"] for _, message in bus.sent} == {"participant_removed"}
    assert_error(runtime_client().get(f"{CONVERSATIONS}/{room.id}"), 404, "ResourceNotFound")


# --- racing twins -------------------------------------------------------------------------------

TWINS = 8


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("path", "body", "model", "key"),
    [
        (f"{USERS}/get-or-create", {"tags": {"crm": "42"}}, User, "user"),
        (
            f"{CONVERSATIONS}/get-or-create",
            {"channel": "dm", "tags": {"thread": "7"}, "discriminateByTags": ["thread"]},
            Conversation,
            "conversation",
        ),
    ],
)
def test_racing_get_or_creates_make_one(path, body, model, key):
    bot = BotFactory()
    token = member_token(bot.workspace)
    answers = at_once(TWINS, lambda: runtime(token, bot.id).post(path, body, format="json"))
    assert sorted(answer.status_code for answer in answers) == [200] * (TWINS - 1) + [201]
    assert len({answer.json()[key]["id"] for answer in answers}) == 1
    assert model.objects.filter(bot=bot).count() == 1


# --- roles, tenants, ids ------------------------------------------------------------------------

BUILDERS = ["owner", "administrator", "manager", "developer"]


def writes(bot: Bot) -> list[tuple[str, str, dict[str, Any]]]:
    """Every write of this file, on objects of `bot`: (method, path, body)."""
    user = UserFactory(bot=bot)
    conversation = ConversationFactory(bot=bot)
    return [
        ("post", USERS, {}),
        ("post", f"{USERS}/get-or-create", {"tags": {"k": "v"}}),
        ("put", f"{USERS}/{user.id}", {"name": "Ada"}),
        ("delete", f"{USERS}/{user.id}", {}),
        ("post", CONVERSATIONS, {"channel": "dm"}),
        ("post", f"{CONVERSATIONS}/get-or-create", {"channel": "dm", "tags": {"k": "v"}}),
        ("put", f"{CONVERSATIONS}/{conversation.id}", {"tags": {"k": "v"}}),
        ("delete", f"{CONVERSATIONS}/{conversation.id}", {}),
    ]


@pytest.mark.parametrize("role", ["viewer", "billing"])
def test_viewer_and_billing_may_not_write(runtime_client, bot, role):
    client = runtime_client(role)
    for method, path, body in writes(bot):
        response = getattr(client, method)(path, body, format="json")
        message = assert_error(response, 403, "Forbidden")["message"]
        assert role in message and "write messages, conversations and users" in message
    assert User.objects.count() == Conversation.objects.count() == 1


@pytest.mark.parametrize("role", BUILDERS)
def test_builders_may_write(runtime_client, bot, role):
    client = runtime_client(role)
    for method, path, body in writes(bot):
        response = getattr(client, method)(path, body, format="json")
        assert response.status_code in (200, 201), (method, path, response.content)


def test_objects_of_another_bot_are_not_found(runtime_client, bot):
    sibling = BotFactory(workspace=bot.workspace)
    for method, path, body in writes(sibling):
        if path in (USERS, CONVERSATIONS) or path.endswith("get-or-create"):
            continue
        response = getattr(runtime_client(), method)(path, body, format="json")
        assert_error(response, 404, "ResourceNotFound")
    assert User.objects.filter(bot=sibling).count() == 1
    assert Conversation.objects.filter(bot=sibling).count() == 1


@pytest.mark.parametrize("method", ["put", "delete"])
@pytest.mark.parametrize(
    "path",
    [
        f"{USERS}/conv_01J00000000000000000000001",
        f"{USERS}/user_short",
        f"{CONVERSATIONS}/user_01J00000000000000000000001",
        f"{CONVERSATIONS}/" + "c" * 40,
    ],
)
def test_malformed_ids(runtime_client, method, path):
    assert_error(
        getattr(runtime_client(), method)(path, {}, format="json"), 400, "InvalidIdentifier"
    )


def test_a_bot_of_another_workspace_is_401(bot):
    other = BotFactory()
    client = runtime(member_token(bot.workspace, Role.OWNER), other.id)
    assert_error(client.post(USERS, {}, format="json"), 401, "Unauthorized")


def test_an_idempotent_retry_makes_one_conversation(runtime_client):
    client = runtime_client()
    body = {"channel": "dm", "tags": {"thread": "7"}}
    first = client.post(CONVERSATIONS, body, format="json", HTTP_IDEMPOTENCY_KEY="conv-1")
    retry = client.post(CONVERSATIONS, body, format="json", HTTP_IDEMPOTENCY_KEY="conv-1")
    assert (retry.status_code, retry.content) == (201, first.content)
    assert retry["Idempotent-Replayed"] == "true"
    assert Conversation.objects.count() == 1


# --- cost -------------------------------------------------------------------------------------


def test_query_count_of_a_found_get_or_create_user(
    runtime_client, bot, django_assert_max_num_queries
):
    client = runtime_client()
    got_or_made(get_or_create_user(client, tags={"crm": "42"}), "user", created=True)
    # savepoint; the bot's row locked; the match; release
    with django_assert_max_num_queries(4):
        got_or_made(get_or_create_user(client, tags={"crm": "42"}), "user", created=False)


def test_query_count_of_a_made_get_or_create_conversation(
    runtime_client, bot, django_assert_max_num_queries
):
    client = runtime_client()
    got_or_made(
        get_or_create_conversation(client, channel="dm", tags={"n": "0"}),
        "conversation",
        created=True,
    )
    # savepoint; the bot's row locked; the match; the insert; release
    with django_assert_max_num_queries(5):
        got_or_made(
            get_or_create_conversation(client, channel="dm", tags={"n": "1"}),
            "conversation",
            created=True,
        )
