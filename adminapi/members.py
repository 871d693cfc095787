"""A workspace's members, as the admin API reads and adds them."""

from django.contrib.auth.models import User as Account
from django.db import transaction

from bots.audit import Actor
from bots.members import account_for_email, member_add
from bots.models import Membership, Workspace
from platform_site.api.errors import InvalidIdentifier, ResourceNotFound
from platform_site.api.ids import is_id
from platform_site.api.pagination import Page, PageRequest, paginate


def members_list(*, workspace: Workspace, page: PageRequest) -> Page[Membership]:
    """Oldest first: membership ids are ULIDs, so they sort by creation time."""
    return paginate(
        Membership.objects.filter(workspace=workspace).select_related("account"),
        ordering=["id"],
        list_name=f"members:{workspace.id}",
        request=page,
    )


def membership_get(*, workspace: Workspace, member_id: str) -> Membership:
    """The workspace's membership `member_id`; another workspace's is not found."""
    if not is_id(member_id, "member"):
        raise InvalidIdentifier(f"{member_id[:40]!r} is not a member id")
    membership = (
        Membership.objects.filter(workspace=workspace, pk=member_id)
        .select_related("account")
        .first()
    )
    if membership is None:
        raise ResourceNotFound(f"Member {member_id!r} not found")
    membership.workspace = workspace
    return membership


def membership_of(*, workspace: Workspace, account: Account) -> Membership:
    """The caller's own membership; gone only when removed since its token was checked."""
    membership = (
        Membership.objects.filter(workspace=workspace, account_id=account.pk)
        .select_related("account")
        .first()
    )
    if membership is None:
        raise ResourceNotFound("You are no longer a member of this workspace")
    membership.workspace = workspace
    return membership


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
