"""Tenancy: workspaces, their members and their bots."""

from django.contrib.auth.models import User as Account
from django.db import transaction

from bots.models import Bot, Membership, Role, Workspace


@transaction.atomic
def workspace_create(*, name: str, owner: Account) -> Workspace:
    workspace = Workspace.objects.create(name=name)
    Membership.objects.create(workspace=workspace, account=owner, role=Role.OWNER)
    return workspace


def membership_create(*, workspace: Workspace, account: Account, role: Role) -> Membership:
    return Membership.objects.create(workspace=workspace, account=account, role=role)


def bot_create(
    *,
    workspace: Workspace,
    name: str,
    tags: dict[str, str] | None = None,
    dev: bool = False,
    webhook_url: str = "",
) -> Bot:
    bot = Bot(workspace=workspace, name=name, tags=tags or {}, dev=dev, webhook_url=webhook_url)
    bot.full_clean()
    bot.save()
    return bot
