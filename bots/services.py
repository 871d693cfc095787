"""Tenancy: workspaces, their members and their bots."""

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User as Account
from django.db import transaction
from django.utils import timezone

from bots.models import Bot, Membership, Role, Workspace
from bots.models.bot import new_signing_secret


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


def bot_signing_secret_rotate(*, bot: Bot) -> Bot:
    """Give the bot a new webhook signing secret. The old one keeps signing
    deliveries beside it for WEBHOOK_SECRET_OVERLAP_SECONDS, so the bot can
    switch to the new secret without refusing a delivery in between."""
    now = timezone.now()
    bot.previous_signing_secret = bot.signing_secret
    bot.previous_signing_secret_expires_at = now + timedelta(
        seconds=settings.WEBHOOK_SECRET_OVERLAP_SECONDS
    )
    bot.signing_secret = new_signing_secret()
    bot.save(
        update_fields=[
            "signing_secret",
            "previous_signing_secret",
            "previous_signing_secret_expires_at",
            "updated_at",
        ]
    )
    return bot
