"""The runtime States API, as the official client (@botpress/client) calls it:
/v1/chat/states/{type}/{id}/{name} (getState, setState, patchState) and its
get-or-set and expiry routes. Expiry as idleness, and the expired state
that reads as absent, are tests/test_state_expiry.py's."""

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from bots.models import Bot, Conversation, Role, User, Workflow
from chat.models import STATE_EXPIRY_MAX_MS, STATE_PAYLOAD_MAX_BYTES, State
from platform_site.api.fields import format_timestamp
from tests.conftest import assert_error
from tests.factories import (
    BotFactory,
    ConversationFactory,
    StateFactory,
    UserFactory,
    WorkflowFactory,
)

pytestmark = pytest.mark.django_db

ULID = "01J0000000000000000000ZZZZ"


@pytest.fixture
def conversation(bot: Bot) -> Conversation:
    return ConversationFactory(bot=bot)


@pytest.fixture
def user(bot: Bot) -> User:
    return UserFactory(bot=bot)


@pytest.fixture
def workflow(bot: Bot) -> Workflow:
    return WorkflowFactory(bot=bot)


def url(type: str, target_id: str, name: str = "session", suffix: str = "") -> str:
    return f"/v1/chat/states/{type}/{target_id}/{name}{suffix}"


def state_of(response: Any, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, response.content
    state: dict[str, Any] = response.json()["state"]
    return state


def set_state(client: Any, path: str, **body: Any) -> Any:
    return client.post(path, {"payload": {"step": 1}, **body}, format="json")


# --- answers --------------------------------------------------------------------------


def test_set_then_get_a_conversation_state(runtime_client, bot, conversation):
    client = runtime_client()
    before = timezone.now()
    path = url("conversation", conversation.id)
    state = state_of(set_state(client, path, payload={"step": 2, "cart": ["a"]}))
    assert state == {
        "id": state["id"],
        "createdAt": state["createdAt"],
        "updatedAt": state["createdAt"],
        "botId": bot.id,
        "conversationId": conversation.id,
        "name": "session",
        "type": "conversation",
        "payload": {"step": 2, "cart": ["a"]},
    }
    assert state["id"].startswith("state_") and len(state["id"]) == 32
    assert state["createdAt"] >= format_timestamp(before)

    response = client.get(path)
    assert response.status_code == 200, response.content
    assert response.json() == {"state": state, "meta": {"cached": False}}


@pytest.mark.parametrize("type", ["user", "bot", "workflow"])
def test_each_type_links_what_the_hosted_api_shows(runtime_client, bot, user, workflow, type):
    target = {"user": user.id, "bot": bot.id, "workflow": workflow.id}[type]
    state = state_of(set_state(runtime_client(), url(type, target)))
    assert state["type"] == type
    linked = {key for key in ("conversationId", "userId") if key in state}
    assert linked == ({"userId"} if type == "user" else set())
    if type == "user":
        assert state["userId"] == user.id
    row = State.objects.get()
    assert (row.target_id, row.user_id, row.workflow_id) == (
        target,
        user.id if type == "user" else None,
        workflow.id if type == "workflow" else None,
    )


def test_a_set_replaces_the_payload_of_the_same_state(runtime_client, conversation):
    client = runtime_client()
    path = url("conversation", conversation.id)
    first = state_of(set_state(client, path, payload={"a": 1, "b": 2}))
    second = state_of(set_state(client, path, payload={"c": 3}))
    assert second["id"] == first["id"] and second["createdAt"] == first["createdAt"]
    assert second["updatedAt"] >= first["updatedAt"]
    assert second["payload"] == {"c": 3}
    assert state_of(client.get(path))["payload"] == {"c": 3}
    assert State.objects.count() == 1


def test_names_and_types_make_different_states(runtime_client, bot, conversation, user):
    client = runtime_client()
    state_of(set_state(client, url("conversation", conversation.id, "a"), payload={"n": 1}))
    state_of(set_state(client, url("conversation", conversation.id, "b"), payload={"n": 2}))
    state_of(set_state(client, url("user", user.id, "a"), payload={"n": 3}))
    state_of(set_state(client, url("bot", bot.id, "a"), payload={"n": 4}))
    assert State.objects.count() == 4
    assert state_of(client.get(url("conversation", conversation.id, "b")))["payload"] == {"n": 2}
    assert state_of(client.get(url("bot", bot.id, "a")))["payload"] == {"n": 4}


def test_a_plugin_name_with_its_alias_is_taken(runtime_client, bot):
    client = runtime_client()
    # encodeURIComponent sends `#` and `:` percent-encoded.
    state = state_of(set_state(client, url("bot", bot.id, "my-plugin%23state:v1.2_x")))
    assert state["name"] == "my-plugin#state:v1.2_x"
    assert state_of(client.get(url("bot", bot.id, "my-plugin%23state:v1.2_x")))["id"] == state["id"]


def test_an_expiry_is_shown_with_when_it_falls(runtime_client, bot):
    state = state_of(set_state(runtime_client(), url("bot", bot.id), expiry=60_000))
    assert state["expiry"] == 60_000
    row = State.objects.get()
    assert row.expires_at == row.updated_at + timedelta(minutes=1)
    assert state["expiresAt"] == format_timestamp(row.expires_at)


def test_a_fractional_expiry_is_kept_in_whole_milliseconds(runtime_client, bot):
    # The hosted API types an expiry as a number, and its own example has a fraction.
    state = state_of(set_state(runtime_client(), url("bot", bot.id), expiry=1296000000.5))
    assert state["expiry"] == 1296000001


def test_an_expiry_left_out_is_kept_and_null_removes_it(runtime_client, bot):
    client = runtime_client()
    path = url("bot", bot.id)
    set_state(client, path, expiry=60_000)
    kept = state_of(set_state(client, path, payload={"step": 2}))
    assert kept["expiry"] == 60_000
    row = State.objects.get()
    assert row.expires_at == row.updated_at + timedelta(minutes=1)
    removed = state_of(set_state(client, path, expiry=None))
    assert "expiry" not in removed and "expiresAt" not in removed
    assert State.objects.get().expires_at is None


def test_a_null_payload_deletes_the_state_and_answers_it(runtime_client, conversation):
    client = runtime_client()
    path = url("conversation", conversation.id)
    kept = state_of(set_state(client, path, payload={"step": 3}, expiry=5000))
    deleted = state_of(client.post(path, {"payload": None}, format="json"))
    assert deleted == kept
    assert not State.objects.exists()
    assert_error(client.get(path), 404, "ResourceNotFound")
    assert_error(client.post(path, {"payload": None}, format="json"), 404, "ResourceNotFound")


# --- patchState -----------------------------------------------------------------------


def test_a_patch_replaces_the_top_level_keys_it_names(runtime_client, user):
    client = runtime_client()
    path = url("user", user.id)
    first = state_of(set_state(client, path, payload={"a": 1, "b": {"x": 1}}, expiry=60_000))
    patched = state_of(client.patch(path, {"payload": {"b": {"y": 2}, "c": 3}}, format="json"))
    assert patched["payload"] == {"a": 1, "b": {"y": 2}, "c": 3}
    assert (patched["id"], patched["createdAt"], patched["expiry"]) == (
        first["id"],
        first["createdAt"],
        60_000,
    )
    assert patched["expiresAt"] >= first["expiresAt"]
    assert state_of(client.get(path))["payload"] == {"a": 1, "b": {"y": 2}, "c": 3}
    no_expiry = state_of(client.patch(path, {"payload": {}, "expiry": None}, format="json"))
    assert "expiry" not in no_expiry and no_expiry["payload"] == patched["payload"]


def test_a_patch_of_an_absent_state_is_404(runtime_client, user):
    response = runtime_client().patch(url("user", user.id), {"payload": {"a": 1}}, format="json")
    assert_error(response, 404, "ResourceNotFound")
    assert not State.objects.exists()


# --- getOrSetState --------------------------------------------------------------------


def test_get_or_set_sets_once_then_answers_the_state_as_it_is(runtime_client, conversation):
    client = runtime_client()
    path = url("conversation", conversation.id, suffix="/get-or-set")
    response = client.post(path, {"payload": {"step": 1}, "expiry": 60_000}, format="json")
    made = state_of(response, 201)
    assert response.json()["meta"] == {"cached": False}
    assert made["payload"] == {"step": 1} and made["expiry"] == 60_000
    expires_at = State.objects.get().expires_at

    response = client.post(path, {"payload": {"step": 9}, "expiry": 1000}, format="json")
    assert state_of(response, 200) == made  # unchanged, its expiry not moved
    assert response.json()["meta"] == {"cached": False}
    assert State.objects.get().expires_at == expires_at


def test_get_or_set_takes_an_idempotency_key(runtime_client, bot):
    client = runtime_client()
    path = url("bot", bot.id, suffix="/get-or-set")
    first = client.post(path, {"payload": {"a": 1}}, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = client.post(path, {"payload": {"a": 1}}, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert (first.status_code, again.status_code) == (201, 201)
    assert again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()


# --- setStateExpiry -------------------------------------------------------------------


def test_the_expiry_route_sets_and_removes_it(runtime_client, workflow):
    client = runtime_client()
    path = url("workflow", workflow.id)
    made = state_of(set_state(client, path, payload={"k": "v"}))
    timed = state_of(client.post(f"{path}/expiry", {"expiry": 1000}, format="json"))
    assert timed["expiry"] == 1000 and timed["payload"] == {"k": "v"}
    assert timed["id"] == made["id"]
    row = State.objects.get()
    assert row.expires_at == row.updated_at + timedelta(seconds=1)
    cleared = state_of(client.post(f"{path}/expiry", {"expiry": None}, format="json"))
    assert "expiry" not in cleared and "expiresAt" not in cleared


def test_the_expiry_of_an_absent_state_is_404(runtime_client, workflow):
    response = runtime_client().post(
        url("workflow", workflow.id, suffix="/expiry"), {"expiry": 1000}, format="json"
    )
    assert_error(response, 404, "ResourceNotFound")


# --- refusals -------------------------------------------------------------------------


def test_integration_states_are_not_served_here(runtime_client):
    body = assert_error(
        runtime_client().get(url("integration", f"intg_{ULID}")), 400, "InvalidPayload"
    )
    assert "integrations are not served here" in body["message"]


@pytest.mark.parametrize(
    ("path", "error_type"),
    [
        (url("channel", f"conv_{ULID}"), "InvalidPayload"),
        (url("conversation", "conv_1"), "InvalidIdentifier"),
        (url("user", "42"), "InvalidIdentifier"),
        (url("bot", f"intg_{ULID}"), "InvalidIdentifier"),
        (url("conversation", f"conv_{ULID}", "two%20words"), "InvalidPayload"),
        (url("conversation", f"conv_{ULID}", "a@b"), "InvalidPayload"),
        (url("conversation", f"conv_{ULID}", "x" * 201), "InvalidPayload"),
    ],
)
def test_a_path_out_of_the_rules_is_400(runtime_client, path, error_type):
    client = runtime_client()
    assert_error(client.get(path), 400, error_type)
    assert_error(set_state(client, path), 400, error_type)


def test_a_name_of_200_characters_is_taken(runtime_client, bot):
    state_of(set_state(runtime_client(), url("bot", bot.id, "n" * 200)))


@pytest.mark.parametrize("suffix", ["", "/get-or-set"])
def test_a_target_that_names_nothing_of_the_bot_is_404(runtime_client, user, suffix):
    client = runtime_client()
    elsewhere = ConversationFactory(bot=BotFactory())
    for type, target in (
        ("conversation", f"conv_{ULID}"),
        ("conversation", elsewhere.id),
        ("workflow", f"wf_{ULID}"),
        # An id of another kind names no conversation.
        ("conversation", user.id),
        ("bot", elsewhere.bot_id),
    ):
        assert_error(set_state(client, url(type, target, suffix=suffix)), 404, "ResourceNotFound")
        assert_error(client.get(url(type, target)), 404, "ResourceNotFound")
    assert not State.objects.exists()


def test_another_bots_token_never_sees_a_state(runtime_client, bot, conversation):
    client = runtime_client()
    state_of(set_state(client, url("conversation", conversation.id)))
    state_of(set_state(client, url("bot", bot.id)))
    other = runtime_client(for_bot=BotFactory())
    for path in (url("conversation", conversation.id), url("bot", bot.id)):
        assert_error(other.get(path), 404, "ResourceNotFound")
        assert_error(other.patch(path, {"payload": {}}, format="json"), 404, "ResourceNotFound")
        assert_error(set_state(other, path), 404, "ResourceNotFound")
    assert State.objects.count() == 2


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"payload": [1]},
        {"payload": "text"},
        {"payload": {}, "other": 1},
        {"payload": {}, "expiry": 0},
        {"payload": {}, "expiry": STATE_EXPIRY_MAX_MS + 1},
        {"payload": {}, "expiry": "1000"},
        {"payload": {}, "expiry": 0.5},
        {"payload": {}, "expiry": True},
    ],
)
def test_a_bad_set_body_is_400(runtime_client, bot, body):
    assert_error(
        runtime_client().post(url("bot", bot.id), body, format="json"), 400, "InvalidPayload"
    )
    assert not State.objects.exists()


@pytest.mark.parametrize(
    ("suffix", "method", "body"),
    [
        ("", "patch", {"payload": None}),
        ("", "patch", {"expiry": 1000}),
        ("/get-or-set", "post", {"payload": None}),
        ("/get-or-set", "post", {"expiry": 1000}),
        ("/expiry", "post", {}),
        ("/expiry", "post", {"expiry": 1000, "payload": {}}),
        ("/expiry", "post", {"expiry": -1}),
    ],
)
def test_bad_bodies_of_the_other_routes_are_400(runtime_client, bot, suffix, method, body):
    client = runtime_client()
    state_of(set_state(client, url("bot", bot.id)))
    path = url("bot", bot.id, suffix=suffix)
    assert_error(getattr(client, method)(path, body, format="json"), 400, "InvalidPayload")


def test_the_longest_expiry_is_taken(runtime_client, bot):
    state = state_of(set_state(runtime_client(), url("bot", bot.id), expiry=STATE_EXPIRY_MAX_MS))
    assert state["expiry"] == STATE_EXPIRY_MAX_MS


def big(size: int) -> dict[str, str]:
    """A payload whose compact JSON is `size` bytes: {"s":"…"}."""
    return {"s": "é" * ((size - 8) // 2) + "x" * ((size - 8) % 2)}


def test_a_payload_at_the_limit_is_taken_and_one_byte_more_is_413(runtime_client, bot):
    client = runtime_client()
    path = url("bot", bot.id)
    state_of(set_state(client, path, payload=big(STATE_PAYLOAD_MAX_BYTES)))
    assert_error(
        set_state(client, path, payload=big(STATE_PAYLOAD_MAX_BYTES + 1)), 413, "PayloadTooLarge"
    )
    assert_error(
        client.post(
            f"{path}/get-or-set", {"payload": big(STATE_PAYLOAD_MAX_BYTES + 1)}, format="json"
        ),
        413,
        "PayloadTooLarge",
    )
    assert len(State.objects.get().payload["s"]) == (STATE_PAYLOAD_MAX_BYTES - 8) // 2


def test_a_patch_that_would_grow_past_the_limit_is_413(runtime_client, bot):
    client = runtime_client()
    path = url("bot", bot.id)
    state_of(set_state(client, path, payload=big(STATE_PAYLOAD_MAX_BYTES - 100)))
    response = client.patch(path, {"payload": {"more": "x" * 200}}, format="json")
    assert_error(response, 413, "PayloadTooLarge")
    assert "more" not in State.objects.get().payload


# --- roles ----------------------------------------------------------------------------


def test_a_viewer_reads_but_does_not_write(runtime_client, bot):
    state_of(set_state(runtime_client(), url("bot", bot.id)))
    viewer = runtime_client(Role.VIEWER)
    assert viewer.get(url("bot", bot.id)).status_code == 200
    for method, suffix, body in (
        ("post", "", {"payload": {"a": 1}}),
        ("post", "", {"payload": None}),
        ("patch", "", {"payload": {"a": 1}}),
        ("post", "/get-or-set", {"payload": {"a": 1}}),
        ("post", "/expiry", {"expiry": 1000}),
    ):
        response = getattr(viewer, method)(url("bot", bot.id, suffix=suffix), body, format="json")
        assert_error(response, 403, "Forbidden")
    assert State.objects.get().payload == {"step": 1}


def test_billing_may_not_read_states(runtime_client, bot):
    assert_error(runtime_client(Role.BILLING).get(url("bot", bot.id)), 403, "Forbidden")


def test_methods_the_routes_do_not_serve_are_405(runtime_client, bot):
    client = runtime_client()
    assert_error(client.delete(url("bot", bot.id)), 405, "MethodNotFound")
    assert_error(client.get(url("bot", bot.id, suffix="/expiry")), 405, "MethodNotFound")


# --- what goes with a conversation, user, workflow or bot -----------------------------


def test_states_go_with_what_they_belong_to(runtime_client, bot, conversation, user, workflow):
    client = runtime_client()
    for type, target in (
        ("conversation", conversation.id),
        ("user", user.id),
        ("workflow", workflow.id),
        ("bot", bot.id),
    ):
        state_of(set_state(client, url(type, target)))
    conversation.delete()
    assert set(State.objects.values_list("type", flat=True)) == {"user", "workflow", "bot"}
    user.delete()
    workflow.delete()
    assert list(State.objects.values_list("type", flat=True)) == ["bot"]
    bot.delete()
    assert not State.objects.exists()


# --- statements per route -------------------------------------------------------------


def statements(postgresql: int, elsewhere: int) -> int:
    return postgresql if connection.vendor == "postgresql" else elsewhere


def test_get_is_one_statement(runtime_client, conversation, django_assert_num_queries):
    client = runtime_client()
    path = url("conversation", conversation.id)
    state_of(set_state(client, path))  # also records the token's first use
    with django_assert_num_queries(1):
        state_of(client.get(path))
    with django_assert_num_queries(1):
        assert_error(client.get(url("conversation", f"conv_{ULID}")), 404, "ResourceNotFound")


def test_set_is_one_statement_on_postgresql(
    runtime_client, bot, conversation, django_assert_num_queries
):
    client = runtime_client()
    state_of(set_state(client, url("bot", bot.id)))  # records the token's first use
    path = url("conversation", conversation.id)
    # Elsewhere: (savepoint) the locked read, the target, (savepoint) the
    # insert (release) (release); then the locked read and the update.
    with django_assert_num_queries(statements(1, 7)):
        state_of(set_state(client, path))
    with django_assert_num_queries(statements(1, 4)):
        state_of(set_state(client, path, payload={"step": 2}, expiry=1000))
    with django_assert_num_queries(statements(1, 4)):
        state_of(set_state(client, path, payload={"step": 3}))


def test_the_other_routes_statements(runtime_client, bot, django_assert_num_queries):
    client = runtime_client()
    path = url("bot", bot.id)
    state_of(set_state(client, path))
    # (savepoint) the locked read, the update (release)
    with django_assert_num_queries(4):
        state_of(client.patch(path, {"payload": {"a": 1}}, format="json"))
    with django_assert_num_queries(4):
        state_of(client.post(f"{path}/expiry", {"expiry": 1000}, format="json"))
    # found: the read alone
    with django_assert_num_queries(1):
        state_of(client.post(f"{path}/get-or-set", {"payload": {}}, format="json"))
    # (savepoint) the locked read, the delete (release)
    with django_assert_num_queries(4):
        state_of(client.post(path, {"payload": None}, format="json"))
    # made: the read, then the insert
    with django_assert_num_queries(statements(2, 7)):
        state_of(client.post(f"{path}/get-or-set", {"payload": {}}, format="json"), 201)


def test_a_state_made_by_a_factory_reads_back(runtime_client, bot):
    StateFactory(bot=bot, payload={"from": "factory"})
    assert state_of(runtime_client().get(url("bot", bot.id)))["payload"] == {"from": "factory"}
