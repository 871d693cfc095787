"""GET /v1/admin/workspaces/{id}/audit-records: the record's shape, newest
first, keyset pages, filters, and only the caller's workspace."""

import json
from typing import Any

import pytest

from bots.actors import PLATFORM, Actor
from bots.models import AuditAction, AuditRecord, Role
from bots.selectors.audit_records import HOSTED_AUDIT_ACTIONS
from bots.services.bots import bot_create, bot_signing_secret_rotate, bot_update
from bots.services.tokens import access_token_create
from tests.conftest import admin_api, assert_error
from tests.factories import AccountFactory, MembershipFactory, WorkspaceFactory, token_for

pytestmark = pytest.mark.django_db

# The hosted API's audit record, as its client types it.
RECORD_KEYS = {"id", "recordedAt", "userId", "userEmail", "resourceId", "action"}


def url(workspace_id: str) -> str:
    return f"/v1/admin/workspaces/{workspace_id}/audit-records"


@pytest.fixture
def manager(workspace):
    return MembershipFactory(workspace=workspace, role=Role.MANAGER)


@pytest.fixture
def client(workspace, manager):
    return admin_api(token_for(manager.account), workspace.id)


def listing(client: Any, workspace: Any, **query: Any) -> dict[str, Any]:
    response = client.get(url(workspace.id), query)
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"records", "meta"}
    return body


def ids(body: dict[str, Any]) -> list[str]:
    return [r["id"] for r in body["records"]]


def make_records(workspace: Any, count: int, actor: Actor = PLATFORM) -> list[AuditRecord]:
    """`count` bot.updated records of the workspace, through the service."""
    bot = bot_create(workspace=workspace, name="Bot 0", actor=actor)
    for n in range(1, count):
        bot_update(bot=bot, name=f"Bot {n}", actor=actor)
    return list(AuditRecord.objects.filter(workspace=workspace, target_id=bot.id))


def test_a_record_written_through_the_api(client, workspace, manager):
    response = client.post("/v1/admin/bots", {"name": "Audited"}, format="json")
    assert response.status_code == 201, response.content
    bot_id = response.json()["bot"]["id"]
    (record,) = listing(client, workspace)["records"]
    assert set(record) == RECORD_KEYS | {"resourceName", "value"}
    assert record["id"].startswith("audit_")
    assert record["recordedAt"].endswith("Z")
    assert record["action"] == "CREATE_BOT"
    assert record["userId"] == str(manager.account.pk)
    assert record["userEmail"] == manager.account.email
    assert (record["resourceId"], record["resourceName"]) == (bot_id, "Audited")
    assert json.loads(record["value"])["name"] == {"from": None, "to": "Audited"}


def test_a_record_of_the_platform_has_no_user(client, workspace):
    make_records(workspace, 1)
    (record,) = listing(client, workspace)["records"]
    assert set(record) == RECORD_KEYS | {"resourceName", "value"}
    assert (record["userId"], record["userEmail"]) == (None, "platform")


def test_a_record_without_changes_has_no_value(client, workspace):
    AuditRecord.objects.create(
        workspace=workspace,
        actor_label="platform",
        action=AuditAction.BOT_SECRET_ROTATED,
        target_type="bot",
        target_id="bot_01J0000000000000000000000X",
    )
    (record,) = listing(client, workspace)["records"]
    assert set(record) == RECORD_KEYS
    assert record["action"] == "UPDATE_BOT"


def test_every_action_has_a_hosted_name():
    assert set(HOSTED_AUDIT_ACTIONS) == set(AuditAction.values)
    assert HOSTED_AUDIT_ACTIONS[AuditAction.TOKEN_CREATED] == "UNKNOWN"


def test_member_records_name_the_account(client, workspace, manager):
    owner = MembershipFactory(workspace=workspace, role=Role.OWNER)
    owners = admin_api(token_for(owner.account), workspace.id)
    members = "/v1/admin/workspace-members"
    added = owners.post(members, {"email": "ann@example.test", "role": "viewer"}, format="json")
    assert added.status_code == 201, added.content
    member_id = added.json()["id"]
    owners.put(f"{members}/{member_id}", {"role": "developer"}, format="json")
    owners.delete(f"{members}/{member_id}")
    records = [r for r in listing(client, workspace)["records"] if r["resourceId"] == member_id]
    assert [r["action"] for r in records] == [
        "REMOVE_WORKSPACE_MEMBER",
        "UPDATE_WORKSPACE_MEMBER",
        "ADD_WORKSPACE_MEMBER",
    ]
    assert {r["resourceName"] for r in records} == {"ann@example.test"}
    assert {r["userId"] for r in records} == {str(owner.account.pk)}


def test_newest_first_and_paged(client, workspace):
    records = make_records(workspace, 7)
    newest_first = sorted((r.id for r in records), reverse=True)
    assert ids(listing(client, workspace)) == newest_first
    seen: list[str] = []
    query: dict[str, Any] = {"pageSize": 3}
    pages = 0
    while True:
        body = listing(client, workspace, **query)
        pages += 1
        seen += ids(body)
        token = body["meta"].get("nextToken")
        if token is None:
            assert body["meta"] == {}
            break
        query = {"pageSize": 3, "nextToken": token}
        assert pages < 10
    assert (seen, pages) == (newest_first, 3)


def test_records_added_while_paging_are_not_shown_twice(client, workspace):
    records = make_records(workspace, 4)
    body = listing(client, workspace, pageSize=2)
    make_records(workspace, 2)
    rest = listing(client, workspace, pageSize=10, nextToken=body["meta"]["nextToken"])
    seen = ids(body) + ids(rest)
    assert len(seen) == len(set(seen))
    assert {r.id for r in records} <= set(seen)


def test_only_the_workspaces_records(client, workspace, manager):
    mine = make_records(workspace, 2)
    make_records(WorkspaceFactory(), 3)
    # The caller's own token changes have no workspace: never listed here.
    access_token_create(account=manager.account, name="another", expires_in_days=None)
    assert sorted(ids(listing(client, workspace))) == sorted(r.id for r in mine)


def test_filter_by_action_and_actor(client, workspace):
    alice = Actor(account=AccountFactory(), client_ip="10.0.0.1")
    bob = Actor(account=AccountFactory(), client_ip="10.0.0.2")
    by_alice = make_records(workspace, 3, alice)
    by_bob = make_records(workspace, 2, bob)
    created = [r.id for r in by_alice + by_bob if r.action == "bot.created"]
    assert sorted(ids(listing(client, workspace, action="bot.created"))) == sorted(created)
    body = listing(client, workspace, actorId=str(bob.account.pk))
    assert sorted(ids(body)) == sorted(r.id for r in by_bob)
    assert {r["userId"] for r in body["records"]} == {str(bob.account.pk)}
    both = listing(client, workspace, actorId=str(alice.account.pk), action="bot.updated")
    assert len(both["records"]) == 2
    assert listing(client, workspace, action="member.removed")["records"] == []


def test_filter_by_a_hosted_action_name(client, workspace):
    records = make_records(workspace, 3)
    bot = bot_create(workspace=workspace, name="Rotated")
    bot_signing_secret_rotate(bot=bot)
    updates = [r.id for r in records if r.action == "bot.updated"]
    rotated = AuditRecord.objects.get(action=AuditAction.BOT_SECRET_ROTATED).id
    body = listing(client, workspace, action="UPDATE_BOT")
    assert sorted(ids(body)) == sorted([*updates, rotated])
    assert {r["action"] for r in body["records"]} == {"UPDATE_BOT"}


def test_a_token_of_a_filtered_list_is_no_position_in_another(client, workspace):
    make_records(workspace, 4)
    token = listing(client, workspace, pageSize=1, action="bot.updated")["meta"]["nextToken"]
    response = client.get(url(workspace.id), {"nextToken": token})
    assert_error(response, 400, "InvalidQuery")


@pytest.mark.parametrize(
    "query",
    [
        {"action": "bot.exploded"},
        {"action": ""},
        {"action": "update_bot"},
        # A hosted name of nothing this service records.
        {"action": "DEPLOY_BOT"},
        {"actorId": "abc"},
        {"actorId": "-1"},
        {"actorId": "9" * 40},
        {"pageSize": "0"},
        {"nextToken": "garbage"},
    ],
)
def test_a_bad_query_is_invalid_query(client, workspace, query):
    make_records(workspace, 2)
    assert_error(client.get(url(workspace.id), query), 400, "InvalidQuery")


def test_a_tampered_token_is_invalid_query(client, workspace):
    make_records(workspace, 3)
    token = listing(client, workspace, pageSize=1)["meta"]["nextToken"]
    tampered = token[:5] + ("A" if token[5] != "A" else "B") + token[6:]
    assert_error(client.get(url(workspace.id), {"nextToken": tampered}), 400, "InvalidQuery")


def test_another_workspace_in_the_path_is_not_found(client, workspace, manager):
    other = WorkspaceFactory()
    make_records(other, 2)
    # Even one the caller is a member of: the path must name the x-workspace-id workspace.
    MembershipFactory(workspace=other, account=manager.account, role=Role.OWNER)
    assert_error(client.get(url(other.id)), 404, "ResourceNotFound")
    assert_error(client.get(url("wkspace_01J0000000000000000000000X")), 404, "ResourceNotFound")


@pytest.mark.parametrize("bad_id", ["nope", "wkspace_1", "bot_01J0000000000000000000000X"])
def test_a_malformed_workspace_id_is_invalid_identifier(client, bad_id):
    assert_error(client.get(url(bad_id)), 400, "InvalidIdentifier")


def test_list_query_count(client, workspace, django_assert_num_queries):
    make_records(workspace, 5)
    listing(client, workspace)  # the token's first use is recorded, once; its credentials kept
    # records
    with django_assert_num_queries(1):
        assert len(listing(client, workspace)["records"]) == 5
