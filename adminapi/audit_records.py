"""Reading a workspace's audit records, newest first."""

from bots.models import AuditRecord, Workspace
from platform_site.api.errors import InvalidIdentifier, ResourceNotFound
from platform_site.api.ids import is_id
from platform_site.api.pagination import Page, PageRequest, paginate


def audit_workspace_check(*, workspace: Workspace, workspace_id: str) -> None:
    """The path names the workspace of x-workspace-id, or nothing the caller may see."""
    if not is_id(workspace_id, "wkspace"):
        raise InvalidIdentifier(f"{workspace_id[:40]!r} is not a workspace id")
    if workspace_id != workspace.id:
        raise ResourceNotFound(f"Workspace {workspace_id!r} not found")


def audit_records_list(
    *,
    workspace: Workspace,
    page: PageRequest,
    action: str | None = None,
    actor_id: int | None = None,
) -> Page[AuditRecord]:
    records = AuditRecord.objects.filter(workspace=workspace)
    if action is not None:
        records = records.filter(action=action)
    if actor_id is not None:
        records = records.filter(actor_id=actor_id)
    return paginate(
        records,
        # Ids are ULIDs: id order is time order, and unique.
        ordering=["-id"],
        list_name=f"audit:{workspace.id}:action={action}:actor={actor_id}",
        request=page,
    )
