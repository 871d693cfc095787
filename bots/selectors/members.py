"""Reading a workspace's members."""

from django.contrib.auth.models import User as Account

from bots.models import Membership, Workspace
from platform_site.foundation.domain_errors import NotFound
from platform_site.foundation.lookups import object_get
from platform_site.foundation.pagination import Page, PageRequest, paginate


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
    membership = object_get(
        Membership.objects.select_related("account"),
        object_id=member_id,
        prefix="member",
        noun="member",
        workspace=workspace,
    )
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
        raise NotFound("You are no longer a member of this workspace")
    membership.workspace = workspace
    return membership
