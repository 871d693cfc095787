"""A workspace's members and their roles. A workspace always keeps at least
one owner, and only an owner makes or unmakes owners; changes to one
workspace's members are serialized on its row, so two concurrent demotions
cannot leave it without an owner."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User as Account
from django.db import transaction
from django.db.models import Q

from bots.actors import PLATFORM, Actor
from bots.models import AuditAction, Membership, Role, Workspace
from bots.services.audit_records import audit_record_add
from platform_site.foundation.credential_invalidation import credentials_changed
from platform_site.foundation.domain_errors import AlreadyExists, NotPermitted

ONLY_OWNERS = "Only an owner of the workspace makes or unmakes owners"
LAST_OWNER = "A workspace keeps at least one owner: make another member owner first"


def lock_members(workspace_id: str) -> None:
    """Hold the workspace's row until the transaction ends: every change to its
    members takes this lock first, so they happen one at a time."""
    Workspace.objects.select_for_update().filter(pk=workspace_id).exists()


def _check_owner_change(acting_role: str | None, *roles: str) -> None:
    """`acting_role` is the actor's role in the workspace; None for the
    platform and superusers, who may do anything."""
    if Role.OWNER in roles and acting_role not in (None, Role.OWNER):
        raise NotPermitted(ONLY_OWNERS)


def _keeps_an_owner(membership: Membership) -> None:
    if membership.role != Role.OWNER:
        return
    owners = Membership.objects.filter(workspace_id=membership.workspace_id, role=Role.OWNER)
    if not owners.exclude(pk=membership.pk).exists():
        raise NotPermitted(LAST_OWNER)


def account_for_email(email: str) -> Account:
    """The account with this e-mail address, made (without a usable password)
    when there is none: it signs in once staff or a password reset give it one."""
    accounts = get_user_model()
    # Its username too: accounts made here are named by their address.
    existing = (
        accounts.objects.filter(Q(email__iexact=email) | Q(username__iexact=email))
        .order_by("id")
        .first()
    )
    if existing is not None:
        return existing
    account = accounts(username=email, email=email)
    account.set_unusable_password()
    account.save()
    return account


@transaction.atomic
def member_add(
    *,
    workspace: Workspace,
    account: Account,
    role: str,
    actor: Actor = PLATFORM,
    acting_role: str | None = None,
) -> Membership:
    _check_owner_change(acting_role, role)
    lock_members(workspace.pk)
    if Membership.objects.filter(workspace=workspace, account=account).exists():
        raise AlreadyExists(f"{account.email or account.get_username()} is a member already")
    membership = Membership.objects.create(workspace=workspace, account=account, role=role)
    audit_record_add(
        actor,
        action=AuditAction.MEMBER_ADDED,
        target_type="member",
        target_id=membership.pk,
        workspace=workspace,
        changes={"account": account.get_username(), "role": role},
    )
    return membership


@transaction.atomic
def member_role_change(
    *, membership: Membership, role: str, actor: Actor = PLATFORM, acting_role: str | None = None
) -> Membership:
    lock_members(membership.workspace_id)
    membership.refresh_from_db(fields=["role"])
    if membership.role == role:
        return membership
    _check_owner_change(acting_role, role, membership.role)
    _keeps_an_owner(membership)
    before = membership.role
    membership.role = role
    membership.save(update_fields=["role", "updated_at"])
    credentials_changed()
    audit_record_add(
        actor,
        action=AuditAction.MEMBER_ROLE_CHANGED,
        target_type="member",
        target_id=membership.pk,
        workspace=membership.workspace,
        changes={
            "account": membership.account.get_username(),
            "role": {"from": before, "to": role},
        },
    )
    return membership


@transaction.atomic
def member_remove(
    *, membership: Membership, actor: Actor = PLATFORM, acting_role: str | None = None
) -> None:
    lock_members(membership.workspace_id)
    membership.refresh_from_db(fields=["role"])
    _check_owner_change(acting_role, membership.role)
    _keeps_an_owner(membership)
    audit_record_add(
        actor,
        action=AuditAction.MEMBER_REMOVED,
        target_type="member",
        target_id=membership.pk,
        workspace=membership.workspace,
        changes={"account": membership.account.get_username(), "role": membership.role},
    )
    membership.delete()
    credentials_changed()


@transaction.atomic
def member_invite(
    *, workspace: Workspace, email: str, role: str, actor: Actor, acting_role: str
) -> Membership:
    """Make the account of `email` a member; the account is made when there is
    none, and not kept when the membership is refused."""
    account = account_for_email(email)
    return member_add(
        workspace=workspace, account=account, role=role, actor=actor, acting_role=acting_role
    )
