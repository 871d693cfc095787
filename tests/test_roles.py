"""The role matrix of the contract, and tenant isolation between workspaces and bots."""

from typing import Any

import pytest

from bots.models import Role
from events.models import Event
from tests.conftest import admin_api as admin
from tests.conftest import assert_error
from tests.conftest import runtime_api as runtime
from tests.factories import (
    BotFactory,
    FileFactory,
    MembershipFactory,
    PassageFactory,
    WorkspaceFactory,
    member_token,
    token_for,
)

pytestmark = pytest.mark.django_db

ALL_ROLES = [role.value for role in Role]
BUILDERS = ["owner", "administrator", "manager", "developer"]
READERS = [*BUILDERS, "viewer"]
EVENT_BODY = {"type": "t", "payload": {"x": 1}}


def test_the_role_lists_cover_every_role():
    assert sorted(ALL_ROLES) == sorted([*READERS, "billing"])


def passages_of(response: Any) -> list[str]:
    assert response.status_code == 200, response.content
    return [p["content"] for p in response.json()["passages"]]


def bot_ids_of(response: Any) -> set[str]:
    assert response.status_code == 200, response.content
    return {b["id"] for b in response.json()["bots"]}


# --- create events --------------------------------------------------------------------


@pytest.mark.parametrize("role", BUILDERS)
def test_builders_may_create_events(runtime_client, bot, role):
    response = runtime_client(role).post("/v1/chat/events", EVENT_BODY, format="json")
    assert response.status_code == 201, response.content
    assert Event.objects.get().bot_id == bot.id


@pytest.mark.parametrize("role", ["viewer", "billing"])
def test_viewer_and_billing_may_not_create_events(runtime_client, role):
    response = runtime_client(role).post("/v1/chat/events", EVENT_BODY, format="json")
    body = assert_error(response, 403, "Forbidden")
    assert role in body["message"]
    assert Event.objects.count() == 0


@pytest.mark.parametrize("role", ["viewer", "billing"])
def test_forbidden_role_is_403_before_the_body_is_validated(runtime_client, role):
    response = runtime_client(role).post("/v1/chat/events", {"bogus": 1}, format="json")
    assert_error(response, 403, "Forbidden")


# --- read passages --------------------------------------------------------------------


@pytest.fixture
def file(bot: Any) -> Any:
    made = FileFactory(bot=bot, key="docs/handbook.txt")
    PassageFactory(file=made, position=1, content="second")
    PassageFactory(file=made, position=0, content="first")
    return made


@pytest.mark.parametrize("role", READERS)
def test_readers_may_read_passages(runtime_client, file, role):
    client = runtime_client(role)
    assert passages_of(client.get(f"/v1/files/{file.id}/passages")) == ["first", "second"]
    assert passages_of(client.get("/v1/files/docs/handbook.txt/passages")) == ["first", "second"]


def test_billing_may_not_read_passages(runtime_client, file):
    response = runtime_client("billing").get(f"/v1/files/{file.id}/passages")
    body = assert_error(response, 403, "Forbidden")
    assert "first" not in body["message"]


def test_billing_gets_403_not_404_for_a_missing_file(runtime_client, bot):
    response = runtime_client("billing").get("/v1/files/file_01J0000000000000000000000X/passages")
    assert_error(response, 403, "Forbidden")


# --- list bots (admin) ------------------------------------------------------------------


@pytest.mark.parametrize("role", READERS)
def test_readers_may_list_bots(admin_client, bot, role):
    assert bot_ids_of(admin_client(role).get("/v1/admin/bots")) == {bot.id}


def test_billing_may_not_list_bots(admin_client, bot):
    response = admin_client("billing").get("/v1/admin/bots")
    body = assert_error(response, 403, "Forbidden")
    assert bot.id not in body["message"]


# --- the role is per workspace ------------------------------------------------------------


def test_the_role_in_the_bots_workspace_decides(bot):
    """An owner elsewhere but a viewer in the bot's workspace may not create events."""
    elsewhere = WorkspaceFactory()
    membership = MembershipFactory(workspace=elsewhere, role=Role.OWNER)
    MembershipFactory(account=membership.account, workspace=bot.workspace, role=Role.VIEWER)
    client = runtime(token_for(membership.account), bot.id)
    assert_error(client.post("/v1/chat/events", EVENT_BODY, format="json"), 403, "Forbidden")
    other_bot = BotFactory(workspace=elsewhere)
    response = runtime(token_for(membership.account), other_bot.id).post(
        "/v1/chat/events", EVENT_BODY, format="json"
    )
    assert response.status_code == 201, response.content
    assert Event.objects.get().bot_id == other_bot.id


def test_admin_role_is_per_workspace(workspace):
    other = WorkspaceFactory()
    membership = MembershipFactory(workspace=workspace, role=Role.BILLING)
    MembershipFactory(account=membership.account, workspace=other, role=Role.VIEWER)
    theirs = BotFactory(workspace=other)
    raw = token_for(membership.account)
    assert_error(admin(raw, workspace.id).get("/v1/admin/bots"), 403, "Forbidden")
    assert bot_ids_of(admin(raw, other.id).get("/v1/admin/bots")) == {theirs.id}


# --- tenant isolation ---------------------------------------------------------------------


@pytest.mark.parametrize("role", ALL_ROLES)
def test_token_of_workspace_a_with_a_bot_of_workspace_b_is_401(bot, role):
    other_bot = BotFactory(workspace=WorkspaceFactory())
    client = runtime(member_token(bot.workspace, role), other_bot.id)
    assert_error(client.post("/v1/chat/events", EVENT_BODY, format="json"), 401, "Unauthorized")
    file = FileFactory(bot=other_bot)
    assert_error(client.get(f"/v1/files/{file.id}/passages"), 401, "Unauthorized")
    assert Event.objects.count() == 0


@pytest.mark.parametrize("role", ALL_ROLES)
def test_admin_token_of_workspace_a_with_workspace_b_is_401(workspace, role):
    other = WorkspaceFactory()
    BotFactory(workspace=other)
    response = admin(member_token(workspace, role), other.id).get("/v1/admin/bots")
    assert_error(response, 401, "Unauthorized")


def test_admin_list_never_shows_another_workspaces_bots(admin_client, workspace):
    ours = {BotFactory(workspace=workspace).id for _ in range(3)}
    other = WorkspaceFactory()
    theirs = {BotFactory(workspace=other).id for _ in range(3)}
    assert bot_ids_of(admin_client("owner").get("/v1/admin/bots")) == ours
    assert bot_ids_of(admin_client("owner", for_workspace=other).get("/v1/admin/bots")) == theirs


def test_admin_list_of_a_member_of_two_workspaces_shows_only_the_named_one(workspace):
    other = WorkspaceFactory()
    ours = {BotFactory(workspace=workspace).id for _ in range(2)}
    theirs = {BotFactory(workspace=other).id for _ in range(2)}
    membership = MembershipFactory(workspace=workspace, role=Role.OWNER)
    MembershipFactory(account=membership.account, workspace=other, role=Role.OWNER)
    raw = token_for(membership.account)
    assert bot_ids_of(admin(raw, workspace.id).get("/v1/admin/bots")) == ours
    assert bot_ids_of(admin(raw, other.id).get("/v1/admin/bots")) == theirs


def test_admin_list_pages_stay_within_the_workspace(workspace):
    other = WorkspaceFactory()
    ours = {BotFactory(workspace=workspace).id for _ in range(5)}
    for _ in range(5):
        BotFactory(workspace=other)
    client = admin(member_token(workspace, Role.VIEWER), workspace.id)
    seen: list[str] = []
    query: dict[str, Any] = {"pageSize": 2}
    for _ in range(10):
        response = client.get("/v1/admin/bots", query)
        assert response.status_code == 200, response.content
        seen += [b["id"] for b in response.json()["bots"]]
        token = response.json()["meta"].get("nextToken")
        if not token:
            break
        query = {"pageSize": 2, "nextToken": token}
    assert sorted(seen) == sorted(ours)


def test_file_of_another_bot_is_404_for_a_member_of_both_workspaces(bot):
    other_bot = BotFactory(workspace=WorkspaceFactory())
    theirs = FileFactory(bot=other_bot, key="docs/secret.txt")
    PassageFactory(file=theirs, content="top secret")
    membership = MembershipFactory(workspace=bot.workspace, role=Role.OWNER)
    MembershipFactory(account=membership.account, workspace=other_bot.workspace, role=Role.OWNER)
    raw = token_for(membership.account)

    # x-bot-id names our bot: the other bot's file is not there, by id or by key.
    client = runtime(raw, bot.id)
    for ref in (theirs.id, theirs.key):
        response = client.get(f"/v1/files/{ref}/passages")
        body = assert_error(response, 404, "ResourceNotFound")
        assert "top secret" not in body["message"]

    # x-bot-id names the other bot: there it is.
    assert passages_of(runtime(raw, other_bot.id).get(f"/v1/files/{theirs.id}/passages")) == [
        "top secret"
    ]


def test_file_of_another_bot_in_the_same_workspace_is_404(runtime_client, bot):
    sibling = BotFactory(workspace=bot.workspace)
    theirs = FileFactory(bot=sibling)
    PassageFactory(file=theirs)
    client = runtime_client(Role.OWNER)
    assert_error(client.get(f"/v1/files/{theirs.id}/passages"), 404, "ResourceNotFound")
    assert_error(client.get(f"/v1/files/{theirs.key}/passages"), 404, "ResourceNotFound")
    response = runtime_client(Role.OWNER, for_bot=sibling).get(f"/v1/files/{theirs.id}/passages")
    assert response.status_code == 200, response.content


def test_same_key_in_two_bots_names_each_bots_own_file(runtime_client, bot):
    sibling = BotFactory(workspace=bot.workspace)
    ours = FileFactory(bot=bot, key="shared/name.txt")
    theirs = FileFactory(bot=sibling, key="shared/name.txt")
    PassageFactory(file=ours, content="ours")
    PassageFactory(file=theirs, content="theirs")
    path = "/v1/files/shared/name.txt/passages"
    assert passages_of(runtime_client().get(path)) == ["ours"]
    assert passages_of(runtime_client(for_bot=sibling).get(path)) == ["theirs"]


def test_events_are_created_for_the_named_bot_only(bot):
    other_bot = BotFactory(workspace=WorkspaceFactory())
    membership = MembershipFactory(workspace=bot.workspace, role=Role.DEVELOPER)
    MembershipFactory(account=membership.account, workspace=other_bot.workspace, role=Role.OWNER)
    raw = token_for(membership.account)
    first = runtime(raw, bot.id).post("/v1/chat/events", EVENT_BODY, format="json")
    second = runtime(raw, other_bot.id).post("/v1/chat/events", EVENT_BODY, format="json")
    assert first.status_code == second.status_code == 201
    assert Event.objects.get(id=first.json()["event"]["id"]).bot_id == bot.id
    assert Event.objects.get(id=second.json()["event"]["id"]).bot_id == other_bot.id
