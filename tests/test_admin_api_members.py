"""/v1/admin/workspace-members: the list, /me, adding by e-mail, role changes
and removal, with the owner rules and the audit records they leave."""

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from bots.models import AuditAction, AuditRecord, Membership, Role
from platform_site.foundation.ids import is_id
from tests.conftest import admin_api, assert_error
from tests.factories import AccountFactory, MembershipFactory, WorkspaceFactory, token_for

pytestmark = pytest.mark.django_db

URL = "/v1/admin/workspace-members"
# The hosted API's workspace member, as its client types it (no updatedAt).
MEMBER_KEYS = {"id", "userId", "email", "role", "createdAt"}


def client_of(membership: Membership) -> Any:
    return admin_api(token_for(membership.account), membership.workspace_id)


@pytest.fixture
def owner(workspace):
    return MembershipFactory(workspace=workspace, role=Role.OWNER)


@pytest.fixture
def administrator(workspace):
    return MembershipFactory(workspace=workspace, role=Role.ADMINISTRATOR)


def member_of(response: Any, status: int = 200) -> dict[str, Any]:
    """The member, answered at the top level as the hosted API's client reads it."""
    assert response.status_code == status, response.content
    body = response.json()
    assert MEMBER_KEYS <= set(body) <= MEMBER_KEYS | {"displayName"}
    return body


def listing(client: Any, **query: Any) -> dict[str, Any]:
    response = client.get(URL, query)
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"members", "meta"}
    return body


def member_records() -> Any:
    """Records of membership changes (making a client's token leaves one too)."""
    return AuditRecord.objects.filter(target_type="member")


# --- read -------------------------------------------------------------------------


def test_list_shape_oldest_first_and_only_this_workspace(workspace, owner):
    named = MembershipFactory(
        workspace=workspace,
        role=Role.BILLING,
        account=AccountFactory(first_name="Ada", last_name="Lovelace"),
    )
    MembershipFactory(workspace=WorkspaceFactory(), role=Role.OWNER)
    body = listing(client_of(owner))
    assert body["meta"] == {}
    first, second = body["members"]
    assert set(first) == MEMBER_KEYS
    assert set(second) == MEMBER_KEYS | {"displayName"}
    assert first == {
        "id": str(owner.pk),
        "userId": str(owner.account.pk),
        "email": owner.account.email,
        "role": "owner",
        "createdAt": first["createdAt"],
    }
    assert first["createdAt"].endswith("Z")
    assert second["displayName"] == "Ada Lovelace"
    assert (second["id"], second["role"]) == (str(named.pk), "billing")


def test_list_pages(workspace, owner):
    others = [MembershipFactory(workspace=workspace) for _ in range(4)]
    client = client_of(owner)
    seen: list[str] = []
    query: dict[str, Any] = {"pageSize": 2}
    for _ in range(10):
        body = listing(client, **query)
        assert len(body["members"]) <= 2
        seen += [m["id"] for m in body["members"]]
        token = body["meta"].get("nextToken")
        if token is None:
            break
        query = {"pageSize": 2, "nextToken": token}
    assert seen == [str(m.pk) for m in [owner, *others]]


@pytest.mark.parametrize("token", ["garbage", "tampered"])
def test_a_bad_token_is_invalid_query(workspace, owner, token):
    MembershipFactory.create_batch(3, workspace=workspace)
    client = client_of(owner)
    if token == "tampered":
        real = listing(client, pageSize=1)["meta"]["nextToken"]
        token = real[:-2] + ("AA" if real[-2:] != "AA" else "BB")
    assert_error(client.get(URL, {"nextToken": token}), 400, "InvalidQuery")


def test_a_token_of_another_workspaces_list_is_invalid_query(workspace, owner):
    MembershipFactory.create_batch(2, workspace=workspace)
    token = listing(client_of(owner), pageSize=1)["meta"]["nextToken"]
    other_owner = MembershipFactory(workspace=WorkspaceFactory(), role=Role.OWNER)
    MembershipFactory.create_batch(2, workspace=other_owner.workspace)
    assert_error(client_of(other_owner).get(URL, {"nextToken": token}), 400, "InvalidQuery")


def test_list_query_count(workspace, owner, django_assert_num_queries):
    MembershipFactory.create_batch(5, workspace=workspace)
    client = client_of(owner)
    listing(client)  # the token's first use is recorded, once; its credentials are kept
    # members with their accounts
    with django_assert_num_queries(1):
        assert len(listing(client)["members"]) == 6


@pytest.mark.parametrize("role", [r.value for r in Role])
def test_me_is_the_callers_membership(workspace, role):
    mine = MembershipFactory(workspace=workspace, role=role)
    MembershipFactory(workspace=workspace, role=Role.OWNER)
    body = member_of(client_of(mine).get(f"{URL}/me"))
    assert (body["id"], body["userId"], body["role"]) == (str(mine.pk), str(mine.account.pk), role)


# --- add --------------------------------------------------------------------------


def test_add_a_new_account_by_email(workspace, administrator):
    body = member_of(
        client_of(administrator).post(
            URL, {"email": "new@example.test", "role": "developer"}, format="json"
        ),
        201,
    )
    account = get_user_model().objects.get(email="new@example.test")
    membership = Membership.objects.get(workspace=workspace, account=account)
    assert set(body) == MEMBER_KEYS
    assert body["id"] == str(membership.pk) and body["userId"] == str(account.pk)
    assert (body["email"], body["role"]) == ("new@example.test", "developer")
    assert not account.has_usable_password()
    record = member_records().get()
    assert record.action == AuditAction.MEMBER_ADDED
    assert record.workspace_id == workspace.id
    assert record.actor_id == administrator.account.pk
    assert record.client_ip == "127.0.0.1"
    assert record.target_id == str(membership.pk)


@pytest.mark.parametrize("send_email", [True, False])
def test_send_email_is_taken_and_ignored(workspace, owner, send_email, mailoutbox):
    body = member_of(
        client_of(owner).post(
            URL,
            {"email": "new@example.test", "role": "viewer", "sendEmail": send_email},
            format="json",
        ),
        201,
    )
    assert body["email"] == "new@example.test"
    assert mailoutbox == []


def test_add_an_existing_account_whatever_the_case_of_its_address(workspace, owner):
    account = AccountFactory(username="ada", email="Ada@Example.test")
    body = member_of(
        client_of(owner).post(URL, {"email": "ada@example.TEST", "role": "viewer"}, format="json"),
        201,
    )
    assert body["userId"] == str(account.pk)
    assert get_user_model().objects.filter(email__iexact="ada@example.test").count() == 1


def test_a_member_already_is_409(workspace, owner):
    existing = MembershipFactory(workspace=workspace, role=Role.VIEWER)
    response = client_of(owner).post(
        URL, {"email": existing.account.email, "role": "developer"}, format="json"
    )
    assert_error(response, 409, "AlreadyExists")
    existing.refresh_from_db()
    assert existing.role == Role.VIEWER
    assert not member_records().exists()


def test_an_administrator_may_not_add_an_owner(workspace, administrator):
    response = client_of(administrator).post(
        URL, {"email": "boss@example.test", "role": "owner"}, format="json"
    )
    assert_error(response, 403, "Forbidden")
    # Nothing is kept, not even the account made for the address.
    assert not get_user_model().objects.filter(email="boss@example.test").exists()
    assert not member_records().exists()


def test_an_owner_may_add_an_owner(workspace, owner):
    response = client_of(owner).post(
        URL, {"email": "boss@example.test", "role": "owner"}, format="json"
    )
    assert member_of(response, 201)["role"] == "owner"


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"email": "a@example.test"}, id="no role"),
        pytest.param({"role": "viewer"}, id="no email"),
        pytest.param({"email": "not-an-address", "role": "viewer"}, id="bad email"),
        pytest.param({"email": "", "role": "viewer"}, id="empty email"),
        pytest.param({"email": 12, "role": "viewer"}, id="email a number"),
        pytest.param({"email": ["a@example.test"], "role": "viewer"}, id="email an array"),
        pytest.param({"email": "a" * 140 + "@example.test", "role": "viewer"}, id="email too long"),
        pytest.param({"email": "a@example.test", "role": "superuser"}, id="unknown role"),
        pytest.param({"email": "a@example.test", "role": "Owner"}, id="role case"),
        pytest.param({"email": "a@example.test", "role": None}, id="role null"),
        pytest.param({"email": "a@example.test", "role": "viewer", "x": 1}, id="unknown field"),
        pytest.param(
            {"email": "a@example.test", "role": "viewer", "sendEmail": "yes"},
            id="sendEmail a string",
        ),
        pytest.param(
            {"email": "a@example.test", "role": "viewer", "sendEmail": None}, id="sendEmail null"
        ),
    ],
)
def test_add_with_a_bad_body_is_invalid_payload(workspace, owner, body):
    assert_error(client_of(owner).post(URL, body, format="json"), 400, "InvalidPayload")
    assert Membership.objects.count() == 1
    assert not member_records().exists()


# --- change a role ----------------------------------------------------------------


def test_change_a_role(workspace, administrator):
    target = MembershipFactory(workspace=workspace, role=Role.VIEWER)
    body = member_of(
        client_of(administrator).put(f"{URL}/{target.pk}", {"role": "manager"}, format="json")
    )
    assert (body["id"], body["role"]) == (str(target.pk), "manager")
    target.refresh_from_db()
    assert target.role == Role.MANAGER
    record = member_records().get()
    assert record.action == AuditAction.MEMBER_ROLE_CHANGED
    assert record.changes["role"] == {"from": "viewer", "to": "manager"}
    assert (record.actor_id, record.client_ip) == (administrator.account.pk, "127.0.0.1")


@pytest.mark.parametrize("acting", [Role.ADMINISTRATOR, Role.MANAGER])
def test_only_an_owner_makes_an_owner(workspace, owner, acting):
    actor = MembershipFactory(workspace=workspace, role=acting)
    target = MembershipFactory(workspace=workspace, role=Role.DEVELOPER)
    response = client_of(actor).put(f"{URL}/{target.pk}", {"role": "owner"}, format="json")
    assert_error(response, 403, "Forbidden")
    target.refresh_from_db()
    assert target.role == Role.DEVELOPER


def test_an_administrator_may_not_demote_an_owner(workspace, owner, administrator):
    MembershipFactory(workspace=workspace, role=Role.OWNER)
    response = client_of(administrator).put(f"{URL}/{owner.pk}", {"role": "viewer"}, format="json")
    assert_error(response, 403, "Forbidden")
    owner.refresh_from_db()
    assert owner.role == Role.OWNER


def test_the_last_owner_may_not_step_down(workspace, owner):
    body = assert_error(
        client_of(owner).put(f"{URL}/{owner.pk}", {"role": "viewer"}, format="json"),
        403,
        "Forbidden",
    )
    assert "owner" in body["message"]
    owner.refresh_from_db()
    assert owner.role == Role.OWNER


def test_an_owner_may_promote_and_then_step_down(workspace, owner):
    client = client_of(owner)
    other = MembershipFactory(workspace=workspace, role=Role.ADMINISTRATOR)
    assert (
        member_of(client.put(f"{URL}/{other.pk}", {"role": "owner"}, format="json"))["role"]
        == "owner"
    )
    assert (
        member_of(client.put(f"{URL}/{owner.pk}", {"role": "developer"}, format="json"))["role"]
        == "developer"
    )
    assert list(Membership.objects.filter(role=Role.OWNER)) == [other]


def test_a_change_without_a_role_answers_the_member_as_it_is(workspace, administrator):
    target = MembershipFactory(workspace=workspace, role=Role.VIEWER)
    body = member_of(client_of(administrator).put(f"{URL}/{target.pk}", {}, format="json"))
    assert (body["id"], body["role"]) == (str(target.pk), "viewer")
    assert not member_records().exists()


@pytest.mark.parametrize(
    "body", [{"role": "boss"}, {"role": 1}, {"role": None}, {"role": "viewer", "x": 1}, []]
)
def test_change_with_a_bad_body_is_invalid_payload(workspace, owner, body):
    target = MembershipFactory(workspace=workspace, role=Role.VIEWER)
    response = client_of(owner).put(f"{URL}/{target.pk}", body, format="json")
    assert_error(response, 400, "InvalidPayload")


# --- remove -----------------------------------------------------------------------


def test_remove_a_member(workspace, administrator):
    target = MembershipFactory(workspace=workspace, role=Role.DEVELOPER)
    client = client_of(administrator)
    response = client.delete(f"{URL}/{target.pk}")
    assert response.status_code == 200, response.content
    assert response.json() == {}
    assert not Membership.objects.filter(pk=target.pk).exists()
    assert get_user_model().objects.filter(pk=target.account.pk).exists()
    record = member_records().get()
    assert record.action == AuditAction.MEMBER_REMOVED
    assert (record.actor_id, record.client_ip) == (administrator.account.pk, "127.0.0.1")
    assert_error(client.delete(f"{URL}/{target.pk}"), 404, "ResourceNotFound")


def test_the_last_owner_may_not_be_removed(workspace, owner):
    assert_error(client_of(owner).delete(f"{URL}/{owner.pk}"), 403, "Forbidden")
    assert Membership.objects.filter(pk=owner.pk).exists()


def test_an_administrator_may_not_remove_an_owner(workspace, owner, administrator):
    MembershipFactory(workspace=workspace, role=Role.OWNER)
    assert_error(client_of(administrator).delete(f"{URL}/{owner.pk}"), 403, "Forbidden")
    assert Membership.objects.filter(pk=owner.pk).exists()


def test_an_owner_may_remove_another_owner(workspace, owner):
    other = MembershipFactory(workspace=workspace, role=Role.OWNER)
    response = client_of(owner).delete(f"{URL}/{other.pk}")
    assert response.status_code == 200, response.content
    assert not Membership.objects.filter(pk=other.pk).exists()


# --- ids --------------------------------------------------------------------------


def test_member_ids_are_prefixed_ulids(workspace, owner):
    added = member_of(
        client_of(owner).post(URL, {"email": "new@example.test", "role": "viewer"}, format="json"),
        201,
    )
    ids = [m["id"] for m in listing(client_of(owner))["members"]]
    assert ids == [owner.pk, added["id"]]
    for member_id in ids:
        assert is_id(member_id, "member") and 28 <= len(member_id) <= 36


@pytest.mark.parametrize(
    "bad_id",
    [
        "abc",
        "1",
        "9" * 30,
        "\u0661",
        "bot_01J0000000000000000000000A",
        "member_01J000000000000000000000",
        "member_01J0000000000000000000000a",
        "member_01J0000000000000000000000I",
        "member_01J0000000000000000000000AA",
    ],
)
@pytest.mark.parametrize("method", ["put", "delete"])
def test_a_malformed_member_id_is_invalid_identifier(workspace, owner, bad_id, method):
    response = getattr(client_of(owner), method)(
        f"{URL}/{bad_id}", {"role": "viewer"}, format="json"
    )
    assert_error(response, 400, "InvalidIdentifier")


@pytest.mark.parametrize("method", ["put", "delete"])
def test_a_member_of_another_workspace_is_not_found(workspace, owner, method):
    theirs = MembershipFactory(workspace=WorkspaceFactory(), role=Role.VIEWER)
    for member_id in (theirs.pk, "member_01J0000000000000000000000A"):
        response = getattr(client_of(owner), method)(
            f"{URL}/{member_id}", {"role": "developer"}, format="json"
        )
        assert_error(response, 404, "ResourceNotFound")
    theirs.refresh_from_db()
    assert theirs.role == Role.VIEWER
