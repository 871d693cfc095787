"""GET /v1/admin/bots: shape, filters, sorts and keyset paging."""

import re
import time
from datetime import UTC, datetime, timedelta

import pytest

from bots.models import Bot, Role
from tests.conftest import assert_error
from tests.factories import BotFactory, WorkspaceFactory

pytestmark = pytest.mark.django_db

URL = "/v1/admin/bots"
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
BASE_TIME = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def client(admin_client):
    return admin_client(Role.DEVELOPER)


def get_list(client, **params):
    response = client.get(URL, params)
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"bots", "meta"}
    return body


def ids(body):
    return [b["id"] for b in body["bots"]]


def make_bots(workspace, count, **kwargs):
    """Bots created at least a millisecond apart, so that creation order is total."""
    bots = []
    for _ in range(count):
        bots.append(BotFactory(workspace=workspace, **kwargs))
        time.sleep(0.002)
    return bots


def walk(client, **params):
    seen, pages, token = [], 0, None
    while True:
        query = dict(params)
        if token is not None:
            query["nextToken"] = token
        body = get_list(client, **query)
        pages += 1
        seen += ids(body)
        token = body["meta"].get("nextToken")
        if token is None:
            assert body["meta"] == {}
            return seen, pages
        assert pages < 100, "paging does not end"


def set_updated_at(bots, minutes):
    """Give each bot an explicit updated_at (auto_now would overwrite it on save)."""
    for bot, minute in zip(bots, minutes, strict=True):
        Bot.objects.filter(pk=bot.pk).update(updated_at=BASE_TIME + timedelta(minutes=minute))


# --- shape ------------------------------------------------------------------


def test_shape(client, workspace):
    plain = BotFactory(workspace=workspace, name="Plain", tags={})
    deployed = BotFactory(
        workspace=workspace,
        name="Deployed",
        tags={"env": "prod", "team": "support"},
        deployed_at=datetime(2026, 3, 4, 5, 6, 7, 891234, tzinfo=UTC),
    )
    body = get_list(client, sortField="createdAt", sortDirection="asc")
    assert body["meta"] == {}
    assert ids(body) == [plain.id, deployed.id]
    first, second = body["bots"]
    assert set(first) == {"id", "createdAt", "updatedAt", "name", "tags"}
    assert set(second) == {"id", "createdAt", "updatedAt", "name", "tags", "deployedAt"}
    assert first["name"] == "Plain"
    assert first["tags"] == {}
    assert second["name"] == "Deployed"
    assert second["tags"] == {"env": "prod", "team": "support"}
    assert second["deployedAt"] == "2026-03-04T05:06:07.891Z"
    for summary in body["bots"]:
        assert summary["id"].startswith("bot_") and len(summary["id"]) == 30
        assert TIMESTAMP.match(summary["createdAt"]), summary
        assert TIMESTAMP.match(summary["updatedAt"]), summary
    Bot.objects.filter(pk=plain.pk).update(updated_at=datetime(2026, 5, 6, 7, 8, 9, tzinfo=UTC))
    body = get_list(client, sortField="createdAt", sortDirection="asc")
    assert body["bots"][0]["updatedAt"] == "2026-05-06T07:08:09.000Z"


def test_empty_workspace(client):
    assert get_list(client) == {"bots": [], "meta": {}}


def test_only_the_workspaces_bots(client, workspace):
    mine = make_bots(workspace, 3)
    other_workspace = WorkspaceFactory()
    BotFactory.create_batch(4, workspace=other_workspace)
    assert sorted(ids(get_list(client))) == sorted(b.id for b in mine)


def test_a_member_of_two_workspaces_sees_the_one_it_names(admin_client, workspace):
    mine = BotFactory(workspace=workspace)
    other_workspace = WorkspaceFactory()
    theirs = BotFactory(workspace=other_workspace)
    assert ids(get_list(admin_client(Role.VIEWER))) == [mine.id]
    assert ids(get_list(admin_client(Role.VIEWER, for_workspace=other_workspace))) == [theirs.id]


def test_billing_may_not_list_bots(admin_client, workspace):
    BotFactory(workspace=workspace)
    assert_error(admin_client(Role.BILLING).get(URL), 403, "Forbidden")


def test_without_credentials_is_401(api_client):
    response = api_client.get(URL)
    assert_error(response, 401, "Unauthorized")
    assert response.headers["WWW-Authenticate"]


# --- filters ----------------------------------------------------------------


def test_dev_filter(client, workspace):
    dev = make_bots(workspace, 2, dev=True)
    prod = make_bots(workspace, 3, dev=False)
    assert sorted(ids(get_list(client, dev="true"))) == sorted(b.id for b in dev)
    assert sorted(ids(get_list(client, dev="false"))) == sorted(b.id for b in prod)
    assert len(get_list(client)["bots"]) == 5


@pytest.mark.parametrize("value", ["maybe", "1", "yes", "TRUE", ""])
def test_dev_not_a_boolean_is_invalid_query(client, value):
    body = assert_error(client.get(URL, {"dev": value}), 400, "InvalidQuery")
    assert "dev" in body["message"]


def test_one_tag(client, workspace):
    prod = BotFactory(workspace=workspace, tags={"env": "prod"})
    BotFactory(workspace=workspace, tags={"env": "staging"})
    BotFactory(workspace=workspace, tags={"team": "prod"})
    BotFactory(workspace=workspace, tags={})
    assert ids(get_list(client, **{"tags[env]": "prod"})) == [prod.id]
    assert ids(get_list(client, **{"tags[env]": "nothing"})) == []


def test_two_tags(client, workspace):
    both = BotFactory(workspace=workspace, tags={"env": "prod", "team": "a", "x": "y"})
    BotFactory(workspace=workspace, tags={"env": "prod", "team": "b"})
    BotFactory(workspace=workspace, tags={"env": "dev", "team": "a"})
    BotFactory(workspace=workspace, tags={"team": "a"})
    assert ids(get_list(client, **{"tags[env]": "prod", "tags[team]": "a"})) == [both.id]


def test_tag_key_with_double_underscore(client, workspace):
    match = BotFactory(workspace=workspace, tags={"a__b": "c"})
    BotFactory(workspace=workspace, tags={"a": {"b": "c"}})
    BotFactory(workspace=workspace, tags={"a__b": "d"})
    assert ids(get_list(client, **{"tags[a__b]": "c"})) == [match.id]


@pytest.mark.parametrize("key", ["0", "2024", "-1", "a.b", "a b", 'a"b', "$", "\u00e9t\u00e9"])
def test_any_string_is_a_tag_key(client, workspace, key):
    match = BotFactory(workspace=workspace, tags={key: "v"})
    BotFactory(workspace=workspace, tags={"other": "v"})
    BotFactory(workspace=workspace, tags={key: "w"})
    assert ids(get_list(client, **{f"tags[{key}]": "v"})) == [match.id]


def test_tag_key_with_lookup_name(client, workspace):
    match = BotFactory(workspace=workspace, tags={"contains": "x"})
    BotFactory(workspace=workspace, tags={"other": "x"})
    assert ids(get_list(client, **{"tags[contains]": "x"})) == [match.id]


def test_tags_and_dev_combine(client, workspace):
    match = BotFactory(workspace=workspace, tags={"env": "prod"}, dev=True)
    BotFactory(workspace=workspace, tags={"env": "prod"}, dev=False)
    assert ids(get_list(client, dev="true", **{"tags[env]": "prod"})) == [match.id]


def test_unknown_query_parameters_are_ignored(client, workspace):
    bot = BotFactory(workspace=workspace)
    assert ids(get_list(client, integrationNames="x", foo="bar")) == [bot.id]


# --- sorting ----------------------------------------------------------------


@pytest.fixture
def seven_bots(workspace):
    bots = make_bots(workspace, 7)
    # Updated in an order unrelated to creation.
    set_updated_at(bots, [30, 10, 60, 0, 50, 20, 40])
    return bots


def expected_order(bots, field, direction):
    rows = Bot.objects.filter(pk__in=[b.pk for b in bots])
    key = "created_at" if field == "createdAt" else "updated_at"
    ordered = sorted(rows, key=lambda b: getattr(b, key), reverse=direction == "desc")
    return [b.id for b in ordered]


SORTS = [
    ("createdAt", "asc"),
    ("createdAt", "desc"),
    ("updatedAt", "asc"),
    ("updatedAt", "desc"),
]


@pytest.mark.parametrize(("field", "direction"), SORTS)
def test_sort_order(client, seven_bots, field, direction):
    body = get_list(client, sortField=field, sortDirection=direction)
    assert ids(body) == expected_order(seven_bots, field, direction)
    stamps = [b[field] for b in body["bots"]]
    assert stamps == sorted(stamps, reverse=direction == "desc")
    assert len(set(stamps)) == 7


def test_updated_at_order_is_not_creation_order(seven_bots):
    # Guards the fixture: otherwise the two sorts could not be told apart.
    assert expected_order(seven_bots, "updatedAt", "asc") != expected_order(
        seven_bots, "createdAt", "asc"
    )


def test_updated_at_values(client, seven_bots):
    body = get_list(client, sortField="updatedAt", sortDirection="asc")
    assert [b["updatedAt"] for b in body["bots"]] == [
        f"2026-01-01T{12 + m // 60:02d}:{m % 60:02d}:00.000Z" for m in [0, 10, 20, 30, 40, 50, 60]
    ]


@pytest.mark.parametrize(
    ("param", "value"),
    [
        ("sortField", "name"),
        ("sortField", "created_at"),
        ("sortField", "id"),
        ("sortField", ""),
        ("sortDirection", "up"),
        ("sortDirection", "ASC"),
        ("sortDirection", ""),
    ],
)
def test_bad_sort_is_invalid_query(client, seven_bots, param, value):
    body = assert_error(client.get(URL, {param: value}), 400, "InvalidQuery")
    assert param in body["message"]


# --- paging -----------------------------------------------------------------


@pytest.mark.parametrize(("field", "direction"), SORTS)
def test_walk_all_pages(client, seven_bots, field, direction):
    seen, pages = walk(client, pageSize=2, sortField=field, sortDirection=direction)
    assert len(seen) == len(set(seen)) == 7
    assert seen == expected_order(seven_bots, field, direction)
    assert pages == 4


@pytest.mark.parametrize("direction", ["asc", "desc"])
def test_walk_with_equal_updated_at(client, workspace, direction):
    bots = make_bots(workspace, 7)
    # Ties: the order must still be total and stable across pages.
    set_updated_at(bots, [5, 5, 5, 1, 5, 1, 9])
    seen, _ = walk(client, pageSize=2, sortField="updatedAt", sortDirection=direction)
    assert len(seen) == len(set(seen)) == 7
    stamps = {b.id: b.updated_at for b in Bot.objects.filter(workspace=workspace)}
    ordered = [stamps[i] for i in seen]
    assert ordered == sorted(ordered, reverse=direction == "desc")


def test_walk_while_bots_are_added(client, workspace):
    existing = make_bots(workspace, 7)
    seen, token, pages = [], None, 0
    while True:
        params = {"pageSize": 2, "sortField": "createdAt", "sortDirection": "asc"}
        if token:
            params["nextToken"] = token
        body = get_list(client, **params)
        seen += ids(body)
        pages += 1
        if pages == 2:
            make_bots(workspace, 2)
        token = body["meta"].get("nextToken")
        if not token:
            break
    assert len(seen) == len(set(seen)) == 9
    assert {b.id for b in existing} <= set(seen)


def test_page_size(client, seven_bots):
    body = get_list(client, pageSize=3, sortField="createdAt", sortDirection="asc")
    assert ids(body) == expected_order(seven_bots, "createdAt", "asc")[:3]
    assert set(body["meta"]) == {"nextToken"}
    assert len(get_list(client, pageSize=200)["bots"]) == 7
    assert get_list(client, pageSize=7)["meta"] == {}


@pytest.mark.parametrize("value", ["0", "201", "-1", "abc", "2.5"])
def test_bad_page_size_is_invalid_query(client, seven_bots, value):
    body = assert_error(client.get(URL, {"pageSize": value}), 400, "InvalidQuery")
    assert "pageSize" in body["message"]


@pytest.fixture
def updated_token(client, seven_bots):
    body = get_list(client, pageSize=2, sortField="updatedAt", sortDirection="asc")
    return body["meta"]["nextToken"]


def test_token_of_another_sort_field_is_invalid_query(client, updated_token):
    response = client.get(
        URL,
        {
            "pageSize": 2,
            "sortField": "createdAt",
            "sortDirection": "asc",
            "nextToken": updated_token,
        },
    )
    assert_error(response, 400, "InvalidQuery")


def test_token_of_another_sort_direction_is_invalid_query(client, updated_token):
    response = client.get(
        URL,
        {
            "pageSize": 2,
            "sortField": "updatedAt",
            "sortDirection": "desc",
            "nextToken": updated_token,
        },
    )
    assert_error(response, 400, "InvalidQuery")


def test_token_of_another_workspace_is_invalid_query(admin_client, client, updated_token):
    other = WorkspaceFactory()
    BotFactory.create_batch(3, workspace=other)
    response = admin_client(Role.DEVELOPER, for_workspace=other).get(
        URL,
        {
            "pageSize": 2,
            "sortField": "updatedAt",
            "sortDirection": "asc",
            "nextToken": updated_token,
        },
    )
    assert_error(response, 400, "InvalidQuery")


@pytest.mark.parametrize("index", [0, 4, -8, -1])
def test_tampered_token_is_invalid_query(client, updated_token, index):
    chars = list(updated_token)
    chars[index] = "A" if chars[index] != "A" else "B"
    response = client.get(
        URL,
        {"sortField": "updatedAt", "sortDirection": "asc", "nextToken": "".join(chars)},
    )
    assert_error(response, 400, "InvalidQuery")


@pytest.mark.parametrize("garbage", ["garbage", " ", ":", "a:b:c", "x" * 3000])
def test_garbage_token_is_invalid_query(client, seven_bots, garbage):
    assert_error(client.get(URL, {"nextToken": garbage}), 400, "InvalidQuery")


def test_same_token_gives_the_same_page(client, updated_token):
    params = {"pageSize": 2, "sortField": "updatedAt", "sortDirection": "asc"}
    first = get_list(client, nextToken=updated_token, **params)
    second = get_list(client, nextToken=updated_token, **params)
    assert first == second
    assert len(first["bots"]) == 2


# --- cost -------------------------------------------------------------------


@pytest.mark.parametrize("page_size", [1, 5, 200])
def test_query_count_of_a_page(client, workspace, page_size, django_assert_num_queries):
    make_bots(workspace, 3)
    BotFactory.create_batch(20, workspace=workspace, tags={"env": "prod"})
    params = {"sortField": "updatedAt", "dev": "false", "tags[env]": "prod"}
    token = get_list(client, pageSize=1, **params)["meta"]["nextToken"]
    # bots (the credentials were kept by the first request)
    with django_assert_num_queries(1):
        response = client.get(URL, {"pageSize": page_size, "nextToken": token, **params})
    assert response.status_code == 200
    assert len(response.json()["bots"]) == min(page_size, 19)
