"""A workspace's settings record."""

from bots.models import Workspace, WorkspaceSettings


def workspace_settings_get(workspace: Workspace) -> WorkspaceSettings:
    """The workspace's settings; the defaults, made now, for a workspace that
    has none yet (one made before settings existed)."""
    found, _ = WorkspaceSettings.objects.get_or_create(workspace=workspace)
    return found
