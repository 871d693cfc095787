"""GET /v1/chat/events/{id} and GET /v1/chat/events: the event shape, tenant
scoping, filters, keyset pages and the role matrix."""

import itertools
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from ulid import ULID

from bots.models import Role
from events.models import Event, EventStatus
from platform_site.foundation.ids import new_id
from tests.conftest import assert_error
from tests.factories import (
    BotFactory,
    ConversationFactory,
    EventFactory,
    MessageFactory,
    UserFactory,
    WorkflowFactory,
    WorkspaceFactory,
)

pytestmark = pytest.mark.django_db

URL = "/v1/chat/events"
TIMESTAMP_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
BASE_KEYS = {"id", "createdAt", "type", "payload", "status", "failureReason"}
READERS = ["owner", "administrator", "manager", "developer", "viewer"]
ALL_STATUSES = [status.value for status in EventStatus]


def detail(client: Any, event_id: str) -> dict[str, Any]:
    response = client.get(f"{URL}/{event_id}")
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"event"}
    return body["event"]


def listing(client: Any, **query: Any) -> dict[str, Any]:
    response = client.get(URL, query)
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"events", "meta"}
    return body


def ids_of(client: Any, **query: Any) -> list[str]:
    return [event["id"] for event in listing(client, **query)["events"]]


def walk(client: Any, **query: Any) -> list[list[str]]:
    """Every page of a list, following nextToken to the end."""
    pages: list[list[str]] = []
    token = None
    for _ in range(100):
        body = listing(client, **query, **({"nextToken": token} if token else {}))
        pages.append([event["id"] for event in body["events"]])
        token = body["meta"].get("nextToken")
        if token is None:
            assert body["meta"] == {}
            return pages
        assert isinstance(token, str) and token
    raise AssertionError("the list never ended")


# --- one event ------------------------------------------------------------------------


def test_get_answers_the_exact_event_shape(runtime_client, bot):
    event = EventFactory(bot=bot, type="order.created", payload={"a": [1, {"b": None}]})
    body = detail(runtime_client(), event.id)
    assert set(body) == BASE_KEYS
    assert body["id"] == event.id
    assert body["type"] == "order.created"
    assert body["payload"] == {"a": [1, {"b": None}]}
    assert body["status"] == "pending"
    assert body["failureReason"] is None
    assert TIMESTAMP_RE.fullmatch(body["createdAt"]), body["createdAt"]
    created = datetime.strptime(body["createdAt"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    row = Event.objects.get(id=event.id)
    assert created == row.created_at.replace(microsecond=row.created_at.microsecond // 1000 * 1000)


@pytest.mark.parametrize(
    "status", [s for s in ALL_STATUSES if s != EventStatus.FAILED], ids=lambda s: s
)
def test_failure_reason_is_null_unless_failed(runtime_client, bot, status):
    event = EventFactory(bot=bot, status=status)
    body = detail(runtime_client(), event.id)
    assert body["status"] == status
    assert body["failureReason"] is None
    assert set(body) == BASE_KEYS


def test_failed_event_says_why(runtime_client, bot):
    reason = "The webhook answered HTTP 404 Not Found: no such route"
    event = EventFactory(bot=bot, status=EventStatus.FAILED, failure_reason=reason)
    body = detail(runtime_client(), event.id)
    assert body["status"] == "failed"
    assert body["failureReason"] == reason


def test_linked_ids_appear_when_set_and_workflow_never(runtime_client, bot):
    conversation = ConversationFactory(bot=bot)
    user = UserFactory(bot=bot)
    message = MessageFactory(conversation=conversation, user=user)
    event = EventFactory(
        bot=bot,
        conversation=conversation,
        user=user,
        message=message,
        workflow=WorkflowFactory(bot=bot),
    )
    body = detail(runtime_client(), event.id)
    assert set(body) == BASE_KEYS | {"conversationId", "userId", "messageId"}
    assert body["conversationId"] == conversation.id
    assert body["userId"] == user.id
    assert body["messageId"] == message.id


@pytest.mark.parametrize("field", ["conversationId", "userId", "messageId"])
def test_only_the_linked_ids_that_are_set_appear(runtime_client, bot, field):
    conversation = ConversationFactory(bot=bot)
    links = {
        "conversationId": {"conversation": conversation},
        "userId": {"user": UserFactory(bot=bot)},
        "messageId": {"message": MessageFactory(conversation=conversation)},
    }
    event = EventFactory(bot=bot, **links[field])
    body = detail(runtime_client(), event.id)
    assert set(body) == BASE_KEYS | {field}


def test_workflow_only_link_shows_no_link(runtime_client, bot):
    event = EventFactory(bot=bot, workflow=WorkflowFactory(bot=bot))
    assert set(detail(runtime_client(), event.id)) == BASE_KEYS


def test_get_event_made_through_the_api(runtime_client):
    client = runtime_client()
    response = client.post(URL, {"type": "t", "payload": {"k": 1}}, format="json")
    assert response.status_code == 201, response.content
    created = response.json()["event"]
    assert detail(client, created["id"]) == created


def test_event_of_another_bot_in_the_same_workspace_is_404(runtime_client, bot):
    sibling = BotFactory(workspace=bot.workspace)
    theirs = EventFactory(bot=sibling, type="secret.type")
    body = assert_error(runtime_client().get(f"{URL}/{theirs.id}"), 404, "ResourceNotFound")
    assert "secret.type" not in body["message"]
    assert detail(runtime_client(for_bot=sibling), theirs.id)["id"] == theirs.id


def test_event_of_a_bot_in_another_workspace_is_404(runtime_client):
    theirs = EventFactory(bot=BotFactory(workspace=WorkspaceFactory()))
    assert_error(runtime_client().get(f"{URL}/{theirs.id}"), 404, "ResourceNotFound")


def test_unknown_event_is_404(runtime_client, bot):
    EventFactory(bot=bot)
    missing = new_id("evt")
    body = assert_error(runtime_client().get(f"{URL}/{missing}"), 404, "ResourceNotFound")
    assert missing in body["message"]


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("evt_123", id="short"),
        pytest.param("nonsense", id="no-prefix"),
        pytest.param(f"conv_{ULID()}", id="other-prefix"),
        pytest.param(f"evt_{str(ULID()).lower()}", id="lowercase"),
        pytest.param(f"evt_{ULID()}X", id="too-long"),
        pytest.param(f"evt_{str(ULID())[:-1]}U", id="not-crockford"),
        pytest.param(f"evt{ULID()}", id="no-underscore"),
        pytest.param("evt_" + "0" * 200, id="very-long"),
    ],
)
def test_malformed_event_id_is_400_invalid_identifier(runtime_client, bot, value):
    assert_error(runtime_client().get(f"{URL}/{value}"), 400, "InvalidIdentifier")


# --- the list -------------------------------------------------------------------------


def test_list_is_newest_first_and_only_the_bots_own(runtime_client, bot):
    ours = [EventFactory(bot=bot).id for _ in range(5)]
    EventFactory(bot=BotFactory(workspace=bot.workspace))
    EventFactory(bot=BotFactory())
    body = listing(runtime_client())
    assert [e["id"] for e in body["events"]] == list(reversed(ours))
    assert body["meta"] == {}


def test_list_items_have_the_event_shape(runtime_client, bot):
    conversation = ConversationFactory(bot=bot)
    linked = EventFactory(bot=bot, conversation=conversation, workflow=WorkflowFactory(bot=bot))
    failed = EventFactory(bot=bot, status=EventStatus.FAILED, failure_reason="why")
    client = runtime_client()
    events = {e["id"]: e for e in listing(client)["events"]}
    assert events[linked.id] == detail(client, linked.id)
    assert set(events[linked.id]) == BASE_KEYS | {"conversationId"}
    assert events[failed.id] == detail(client, failed.id)
    assert events[failed.id]["failureReason"] == "why"


def test_empty_list(runtime_client, bot):
    assert listing(runtime_client()) == {"events": [], "meta": {}}


@pytest.fixture
def catalogue(bot: Any) -> dict[str, Any]:
    """Events of every combination of two types, two conversations (or none),
    two users, a message, a workflow and three statuses; with the values a
    filter can take."""
    conversations = [ConversationFactory(bot=bot), ConversationFactory(bot=bot)]
    users = [UserFactory(bot=bot), UserFactory(bot=bot)]
    message = MessageFactory(conversation=conversations[0], user=users[0])
    workflow = WorkflowFactory(bot=bot)
    rows = []
    combos = itertools.product(
        ["order.paid", "order.refunded"],
        [conversations[0], conversations[1], None],
        [users[0], None],
        [message, None],
        [workflow, None],
        [EventStatus.FAILED, EventStatus.PENDING, EventStatus.SCHEDULED],
    )
    for index, (type_, conversation, user, msg, wf, status) in enumerate(combos):
        # Not every combination: enough that each filter and each pair narrows.
        if index % 3 == 1:
            continue
        rows.append(
            EventFactory(
                bot=bot,
                type=type_,
                conversation=conversation,
                user=user,
                message=msg,
                workflow=wf,
                status=status,
            )
        )
    # Another bot's event matching everything: never listed.
    other = BotFactory(workspace=bot.workspace)
    EventFactory(bot=other, type="order.paid", status=EventStatus.FAILED)
    return {
        "rows": rows,
        "values": {
            "type": "order.paid",
            "conversationId": conversations[0].id,
            "userId": users[0].id,
            "messageId": message.id,
            "workflowId": workflow.id,
            "status": "failed",
        },
    }


ATTRIBUTE = {
    "type": "type",
    "conversationId": "conversation_id",
    "userId": "user_id",
    "messageId": "message_id",
    "workflowId": "workflow_id",
    "status": "status",
}
FILTERS = list(ATTRIBUTE)


def expected_ids(rows: list[Event], query: dict[str, str]) -> list[str]:
    matching = [
        row.id
        for row in rows
        if all(getattr(row, ATTRIBUTE[name]) == value for name, value in query.items())
    ]
    return sorted(matching, reverse=True)


@pytest.mark.parametrize("name", FILTERS)
def test_each_filter_alone(runtime_client, catalogue, name):
    query = {name: catalogue["values"][name]}
    expected = expected_ids(catalogue["rows"], query)
    assert 0 < len(expected) < len(catalogue["rows"])
    assert [i for page in walk(runtime_client(), pageSize=200, **query) for i in page] == expected


@pytest.mark.parametrize(
    "names",
    [
        *itertools.combinations(FILTERS, 2),
        ("type", "status", "conversationId"),
        ("userId", "messageId", "workflowId", "status"),
        tuple(FILTERS),
    ],
    ids=lambda names: "+".join(names),
)
def test_filters_combined(runtime_client, catalogue, names):
    query = {name: catalogue["values"][name] for name in names}
    expected = expected_ids(catalogue["rows"], query)
    assert [i for page in walk(runtime_client(), pageSize=200, **query) for i in page] == expected


@pytest.mark.parametrize("status", ALL_STATUSES)
def test_status_filter_takes_every_status(runtime_client, bot, status):
    for each in ALL_STATUSES:
        EventFactory(bot=bot, status=each)
    events = listing(runtime_client(), status=status)["events"]
    assert [e["status"] for e in events] == [status]


def test_filter_by_another_bots_conversation_is_an_empty_list(runtime_client, bot):
    EventFactory(bot=bot, conversation=ConversationFactory(bot=bot))
    theirs = ConversationFactory(bot=BotFactory(workspace=bot.workspace))
    EventFactory(bot=theirs.bot, conversation=theirs)
    assert listing(runtime_client(), conversationId=theirs.id) == {"events": [], "meta": {}}


def test_filter_with_no_match_is_an_empty_list(runtime_client, bot):
    EventFactory(bot=bot, type="a")
    assert listing(runtime_client(), type="b") == {"events": [], "meta": {}}
    assert listing(runtime_client(), userId=new_id("user")) == {"events": [], "meta": {}}


def test_empty_filter_values_are_no_filter(runtime_client, bot):
    ids = [EventFactory(bot=bot, status=s).id for s in ("pending", "failed")]
    assert ids_of(runtime_client(), status="", type="", conversationId="") == ids[::-1]


def test_unknown_query_parameters_are_ignored(runtime_client, bot):
    event = EventFactory(bot=bot)
    assert ids_of(runtime_client(), integrationNames="x", sort="asc") == [event.id]


def test_bad_status_is_400_invalid_query_listing_the_choices(runtime_client, bot):
    body = assert_error(runtime_client().get(URL, {"status": "done"}), 400, "InvalidQuery")
    assert "status" in body["message"]
    for status in ALL_STATUSES:
        assert status in body["message"]


@pytest.mark.parametrize("name", ["conversationId", "userId", "messageId", "workflowId"])
@pytest.mark.parametrize("length", [1, 27, 37, 300])
def test_id_filter_of_wrong_length_is_400_invalid_query(runtime_client, bot, name, length):
    body = assert_error(runtime_client().get(URL, {name: "x" * length}), 400, "InvalidQuery")
    assert name in body["message"]


@pytest.mark.parametrize("length", [28, 36])
def test_id_filter_of_28_and_36_characters_is_accepted(runtime_client, bot, length):
    assert listing(runtime_client(), conversationId="c" * length)["events"] == []


def test_type_filter_over_200_characters_is_400_invalid_query(runtime_client, bot):
    body = assert_error(runtime_client().get(URL, {"type": "t" * 201}), 400, "InvalidQuery")
    assert "type" in body["message"]
    assert listing(runtime_client(), type="t" * 200)["events"] == []


# --- pages ------------------------------------------------------------------------------


def test_pages_walk_every_event_once_in_order(runtime_client, bot):
    ids = [EventFactory(bot=bot).id for _ in range(7)]
    pages = walk(runtime_client(), pageSize=3)
    assert [len(page) for page in pages] == [3, 3, 1]
    assert [i for page in pages for i in page] == ids[::-1]


def test_a_full_last_page_has_no_token(runtime_client, bot):
    ids = [EventFactory(bot=bot).id for _ in range(4)]
    pages = walk(runtime_client(), pageSize=2)
    assert pages == [ids[:1:-1], ids[1::-1]]


def test_filtered_pages_walk_only_the_matches(runtime_client, bot):
    failed = []
    for index in range(9):
        event = EventFactory(bot=bot, status="failed" if index % 2 else "processed")
        if index % 2:
            failed.append(event.id)
    pages = walk(runtime_client(), pageSize=2, status="failed")
    assert [len(page) for page in pages] == [2, 2]
    assert [i for page in pages for i in page] == failed[::-1]


def test_events_added_while_paging_are_neither_shown_nor_make_one_skip(runtime_client, bot):
    ids = [EventFactory(bot=bot).id for _ in range(5)]
    client = runtime_client()
    first = listing(client, pageSize=2)
    EventFactory.create_batch(3, bot=bot)
    seen = [e["id"] for e in first["events"]]
    token = first["meta"]["nextToken"]
    while token:
        body = listing(client, pageSize=2, nextToken=token)
        seen += [e["id"] for e in body["events"]]
        token = body["meta"].get("nextToken")
    assert seen == ids[::-1]


def test_a_token_survives_a_change_of_page_size(runtime_client, bot):
    ids = [EventFactory(bot=bot).id for _ in range(6)]
    client = runtime_client()
    token = listing(client, pageSize=2)["meta"]["nextToken"]
    assert ids_of(client, pageSize=10, nextToken=token) == ids[3::-1]


@pytest.mark.parametrize(
    ("first_query", "second_query"),
    [
        pytest.param({"status": "failed"}, {"status": "pending"}, id="other-status"),
        pytest.param({}, {"type": "t"}, id="unfiltered-to-filtered"),
        pytest.param({"type": "t"}, {}, id="filtered-to-unfiltered"),
        pytest.param({"type": "t"}, {"type": "t", "status": "failed"}, id="one-more-filter"),
    ],
)
def test_a_token_of_a_differently_filtered_list_is_400(
    runtime_client, bot, first_query, second_query
):
    for _ in range(3):
        EventFactory(bot=bot, type="t", status="failed")
        EventFactory(bot=bot, type="t", status="pending")
    client = runtime_client()
    token = listing(client, pageSize=1, **first_query)["meta"]["nextToken"]
    response = client.get(URL, {"pageSize": 1, "nextToken": token, **second_query})
    body = assert_error(response, 400, "InvalidQuery")
    assert "nextToken" in body["message"]


def test_a_token_of_another_bots_list_is_400(runtime_client, bot):
    sibling = BotFactory(workspace=bot.workspace)
    for owner in (bot, sibling):
        EventFactory.create_batch(2, bot=owner)
    token = listing(runtime_client(for_bot=sibling), pageSize=1)["meta"]["nextToken"]
    response = runtime_client().get(URL, {"pageSize": 1, "nextToken": token})
    assert_error(response, 400, "InvalidQuery")


def test_a_token_of_the_bots_list_is_400_on_events(runtime_client, admin_client, bot):
    BotFactory.create_batch(2, workspace=bot.workspace)
    EventFactory.create_batch(2, bot=bot)
    token = admin_client().get("/v1/admin/bots", {"pageSize": 1}).json()["meta"]["nextToken"]
    assert_error(runtime_client().get(URL, {"nextToken": token}), 400, "InvalidQuery")


@pytest.mark.parametrize(
    "token",
    ["garbage", "W10:1abc:xyz", "e30", "%00", "x" * 5000],
)
def test_a_tampered_token_is_400(runtime_client, bot, token):
    EventFactory(bot=bot)
    assert_error(runtime_client().get(URL, {"nextToken": token}), 400, "InvalidQuery")


def test_a_token_with_its_position_changed_is_400(runtime_client, bot):
    EventFactory.create_batch(3, bot=bot)
    client = runtime_client()
    token = listing(client, pageSize=1)["meta"]["nextToken"]
    value, _, signature = token.rpartition(":")
    forged = f"{value[:-1]}{'A' if value[-1] != 'A' else 'B'}:{signature}"
    assert_error(client.get(URL, {"nextToken": forged}), 400, "InvalidQuery")


def test_default_page_size_is_20(runtime_client, bot):
    EventFactory.create_batch(25, bot=bot)
    body = listing(runtime_client())
    assert len(body["events"]) == 20
    assert "nextToken" in body["meta"]


@pytest.mark.parametrize("size", [1, 200])
def test_page_size_of_1_and_200_is_accepted(runtime_client, bot, size):
    EventFactory.create_batch(3, bot=bot)
    assert len(listing(runtime_client(), pageSize=size)["events"]) == min(size, 3)


@pytest.mark.parametrize(
    "size", ["0", "201", "-1", "abc", "1.5", "", "1e2", "10000000000000000000"]
)
def test_page_size_out_of_range_is_400_invalid_query(runtime_client, bot, size):
    body = assert_error(runtime_client().get(URL, {"pageSize": size}), 400, "InvalidQuery")
    assert "pageSize" in body["message"]


@pytest.mark.parametrize("page_size", [1, 5, 200])
def test_query_count_of_a_page(runtime_client, bot, page_size, django_assert_num_queries):
    conversation = ConversationFactory(bot=bot)
    for _ in range(12):
        EventFactory(bot=bot, status="failed", conversation=conversation, failure_reason="x")
        EventFactory(bot=bot, status="processed")
    client = runtime_client()
    params = {"status": "failed", "conversationId": conversation.id}
    token = listing(client, pageSize=1, **params)["meta"]["nextToken"]
    # events (the credentials were kept by the first request)
    with django_assert_num_queries(1):
        response = client.get(URL, {"pageSize": page_size, "nextToken": token, **params})
    assert response.status_code == 200
    assert len(response.json()["events"]) == min(page_size, 11)


def test_query_count_of_one_event(runtime_client, bot, django_assert_num_queries):
    event = EventFactory(bot=bot)
    client = runtime_client()
    detail(client, event.id)
    with django_assert_num_queries(1):  # the event (the credentials were kept)
        detail(client, event.id)


# --- roles --------------------------------------------------------------------------------


@pytest.mark.parametrize("role", READERS)
def test_readers_may_read_events(runtime_client, bot, role):
    event = EventFactory(bot=bot)
    client = runtime_client(role)
    assert ids_of(client) == [event.id]
    assert detail(client, event.id)["id"] == event.id


def test_billing_may_not_read_events(runtime_client, bot):
    event = EventFactory(bot=bot, type="secret.type")
    client = runtime_client(Role.BILLING)
    assert_error(client.get(URL), 403, "Forbidden")
    body = assert_error(client.get(f"{URL}/{event.id}"), 403, "Forbidden")
    assert "secret.type" not in body["message"]


def test_billing_gets_403_not_404_or_400(runtime_client, bot):
    client = runtime_client(Role.BILLING)
    assert_error(client.get(f"{URL}/{new_id('evt')}"), 403, "Forbidden")
    assert_error(client.get(f"{URL}/nonsense"), 403, "Forbidden")
    assert_error(client.get(URL, {"status": "bogus"}), 403, "Forbidden")


def test_no_token_is_401(api_client, bot):
    event = EventFactory(bot=bot)
    for path in (URL, f"{URL}/{event.id}"):
        response = api_client.get(path, HTTP_X_BOT_ID=bot.id)
        assert_error(response, 401, "Unauthorized")
        assert response.headers.get("WWW-Authenticate")


def test_a_bad_token_is_401(api_client, bot):
    event = EventFactory(bot=bot)
    response = api_client.get(
        f"{URL}/{event.id}", HTTP_AUTHORIZATION="Bearer bp_pat_nope", HTTP_X_BOT_ID=bot.id
    )
    assert_error(response, 401, "Unauthorized")
