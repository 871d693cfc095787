"""Members and roles: a workspace always keeps an owner, only owners make or
unmake owners, and every change leaves an audit record (or none when refused)."""

import threading

import pytest
from django.contrib.auth import get_user_model
from django.db import close_old_connections

from bots.models import AuditAction, AuditRecord, Membership, Role
from bots.services.members import (
    LAST_OWNER,
    ONLY_OWNERS,
    account_for_email,
    member_add,
    member_remove,
    member_role_change,
)
from platform_site.foundation.domain_errors import AlreadyExists, NotPermitted
from tests.factories import AccountFactory, MembershipFactory, WorkspaceFactory

pytestmark = pytest.mark.django_db


def records(action: AuditAction) -> int:
    return AuditRecord.objects.filter(action=action).count()


def test_an_administrator_adds_a_member():
    workspace = WorkspaceFactory()
    account = AccountFactory()
    membership = member_add(
        workspace=workspace, account=account, role=Role.VIEWER, acting_role=Role.ADMINISTRATOR
    )
    assert membership.role == Role.VIEWER
    record = AuditRecord.objects.get(action=AuditAction.MEMBER_ADDED)
    assert (record.target_type, record.target_id) == ("member", str(membership.pk))


@pytest.mark.parametrize("acting_role", [Role.ADMINISTRATOR, Role.MANAGER])
def test_only_an_owner_makes_an_owner(acting_role):
    workspace = WorkspaceFactory()
    with pytest.raises(NotPermitted, match=ONLY_OWNERS):
        member_add(
            workspace=workspace, account=AccountFactory(), role=Role.OWNER, acting_role=acting_role
        )
    assert not Membership.objects.exists()
    assert records(AuditAction.MEMBER_ADDED) == 0


def test_an_owner_and_the_platform_make_owners():
    workspace = WorkspaceFactory()
    member_add(workspace=workspace, account=AccountFactory(), role=Role.OWNER)
    member_add(
        workspace=workspace, account=AccountFactory(), role=Role.OWNER, acting_role=Role.OWNER
    )
    assert Membership.objects.filter(role=Role.OWNER).count() == 2


def test_a_member_is_added_once():
    membership = MembershipFactory()
    with pytest.raises(AlreadyExists):
        member_add(workspace=membership.workspace, account=membership.account, role=Role.VIEWER)
    assert records(AuditAction.MEMBER_ADDED) == 0


def test_role_changes_are_recorded_from_and_to():
    membership = MembershipFactory(role=Role.VIEWER)
    member_role_change(membership=membership, role=Role.MANAGER, acting_role=Role.ADMINISTRATOR)
    record = AuditRecord.objects.get(action=AuditAction.MEMBER_ROLE_CHANGED)
    assert record.changes["role"] == {"from": Role.VIEWER, "to": Role.MANAGER}
    member_role_change(membership=membership, role=Role.MANAGER)  # no change, no record
    assert records(AuditAction.MEMBER_ROLE_CHANGED) == 1


def test_an_administrator_neither_promotes_to_nor_demotes_from_owner():
    owner = MembershipFactory(role=Role.OWNER)
    MembershipFactory(workspace=owner.workspace, role=Role.OWNER)
    viewer = MembershipFactory(workspace=owner.workspace, role=Role.VIEWER)
    with pytest.raises(NotPermitted, match=ONLY_OWNERS):
        member_role_change(membership=viewer, role=Role.OWNER, acting_role=Role.ADMINISTRATOR)
    with pytest.raises(NotPermitted, match=ONLY_OWNERS):
        member_role_change(membership=owner, role=Role.VIEWER, acting_role=Role.ADMINISTRATOR)
    with pytest.raises(NotPermitted, match=ONLY_OWNERS):
        member_remove(membership=owner, acting_role=Role.ADMINISTRATOR)
    assert Membership.objects.filter(role=Role.OWNER).count() == 2
    assert records(AuditAction.MEMBER_ROLE_CHANGED) + records(AuditAction.MEMBER_REMOVED) == 0


def test_the_last_owner_stays():
    owner = MembershipFactory(role=Role.OWNER)
    with pytest.raises(NotPermitted, match=LAST_OWNER):
        member_role_change(membership=owner, role=Role.ADMINISTRATOR, acting_role=Role.OWNER)
    with pytest.raises(NotPermitted, match=LAST_OWNER):
        member_remove(membership=owner, acting_role=Role.OWNER)
    with pytest.raises(NotPermitted, match=LAST_OWNER):
        member_remove(membership=owner)  # not even the platform
    owner.refresh_from_db()
    assert owner.role == Role.OWNER


def test_one_of_two_owners_steps_down():
    first = MembershipFactory(role=Role.OWNER)
    MembershipFactory(workspace=first.workspace, role=Role.OWNER)
    member_role_change(membership=first, role=Role.DEVELOPER, acting_role=Role.OWNER)
    first.refresh_from_db()
    assert first.role == Role.DEVELOPER


def test_removal_is_recorded():
    membership = MembershipFactory(role=Role.DEVELOPER)
    member_remove(membership=membership, acting_role=Role.ADMINISTRATOR)
    assert not Membership.objects.exists()
    record = AuditRecord.objects.get(action=AuditAction.MEMBER_REMOVED)
    assert record.changes == {"account": membership.account.username, "role": Role.DEVELOPER}


def test_account_for_email_finds_or_makes_one():
    existing = AccountFactory(username="Ann", email="Ann@Example.test")
    assert account_for_email("ann@example.test") == existing
    made = account_for_email("new@example.test")
    assert (made.username, made.email) == ("new@example.test", "new@example.test")
    assert not made.has_usable_password()
    assert get_user_model().objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_two_owners_demoting_each_other_at_once_leave_one_owner():
    """Changes to one workspace's members are serialized on its row: of two
    concurrent demotions of its only two owners, one is refused."""
    first = MembershipFactory(role=Role.OWNER)
    second = MembershipFactory(workspace=first.workspace, role=Role.OWNER)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def demote(membership: Membership) -> None:
        try:
            barrier.wait()
            member_role_change(membership=membership, role=Role.VIEWER, acting_role=Role.OWNER)
            outcomes.append("demoted")
        except NotPermitted:
            outcomes.append("refused")
        finally:
            close_old_connections()

    threads = [threading.Thread(target=demote, args=(m,)) for m in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes) == ["demoted", "refused"]
    assert Membership.objects.filter(workspace=first.workspace, role=Role.OWNER).count() == 1


def test_account_for_email_finds_an_account_named_by_the_address():
    existing = AccountFactory(username="named@example.test", email="other@example.test")
    assert account_for_email("Named@example.test") == existing
