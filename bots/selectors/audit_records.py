"""Reading a workspace's audit records, newest first."""

from bots.models import AuditAction, AuditRecord, Workspace
from platform_site.foundation.lookups import id_form_check, object_not_found
from platform_site.foundation.pagination import Page, PageRequest, paginate

# The hosted API's name of each action; one it has no name for is UNKNOWN.
HOSTED_AUDIT_ACTIONS: dict[str, str] = {
    AuditAction.MEMBER_ADDED: "ADD_WORKSPACE_MEMBER",
    AuditAction.MEMBER_ROLE_CHANGED: "UPDATE_WORKSPACE_MEMBER",
    AuditAction.MEMBER_REMOVED: "REMOVE_WORKSPACE_MEMBER",
    AuditAction.TOKEN_CREATED: "UNKNOWN",
    AuditAction.TOKEN_REVOKED: "UNKNOWN",
    AuditAction.TOKEN_RATE_LIMIT_CHANGED: "UNKNOWN",
    AuditAction.BOT_CREATED: "CREATE_BOT",
    AuditAction.BOT_UPDATED: "UPDATE_BOT",
    AuditAction.BOT_DELETED: "DELETE_BOT",
    AuditAction.BOT_SECRET_ROTATED: "UPDATE_BOT",
    AuditAction.SETTINGS_CHANGED: "UPDATE_WORKSPACE",
}


def audit_actions_named(name: str) -> list[str]:
    """The actions a filter names: this service's own name (`bot.updated`)
    names one, the hosted name (`UPDATE_BOT`) every action answered by it."""
    if name in AuditAction.values:
        return [name]
    return [action for action, hosted in HOSTED_AUDIT_ACTIONS.items() if hosted == name]


def audit_workspace_check(*, workspace: Workspace, workspace_id: str) -> None:
    """The path names the workspace of x-workspace-id, or nothing the caller may see."""
    id_form_check(workspace_id, prefix="wkspace", noun="workspace")
    if workspace_id != workspace.id:
        raise object_not_found("workspace", workspace_id)


def audit_records_list(
    *,
    workspace: Workspace,
    page: PageRequest,
    action: str | None = None,
    actor_id: int | None = None,
) -> Page[AuditRecord]:
    records = AuditRecord.objects.filter(workspace=workspace)
    if action is not None:
        records = records.filter(action__in=audit_actions_named(action))
    if actor_id is not None:
        records = records.filter(actor_id=actor_id)
    return paginate(
        records,
        # Ids are ULIDs: id order is time order, and unique.
        ordering=["-id"],
        list_name=f"audit:{workspace.id}:action={action}:actor={actor_id}",
        request=page,
    )
