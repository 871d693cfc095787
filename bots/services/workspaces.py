"""Workspaces: made with their settings and their first owner."""

from django.contrib.auth.models import User as Account
from django.db import transaction

from bots.actors import PLATFORM, Actor
from bots.models import Role, Workspace, WorkspaceSettings
from bots.services.members import member_add


@transaction.atomic
def workspace_create(*, name: str, owner: Account, actor: Actor = PLATFORM) -> Workspace:
    workspace = Workspace.objects.create(name=name)
    WorkspaceSettings.objects.create(workspace=workspace)
    member_add(workspace=workspace, account=owner, role=Role.OWNER, actor=actor)
    return workspace
