"""Every admin list, and the workspace and bot pages, run as many queries
with 25 rows as with 3: for a superuser and for a scoped staff account."""

import pytest
from django.contrib import admin
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from bots.actors import Actor
from bots.admin import WorkspaceScoped
from bots.models import AuditAction, Role, WorkspaceSettings
from bots.services.audit_records import audit_record_add
from bots.services.tokens import access_token_create
from chat.models import MessageFeedback
from events.models import AttemptOutcome, DeliveryAttempt
from tests.factories import (
    AccountFactory,
    BotFactory,
    ChatConnectionFactory,
    EventFactory,
    InstallationFactory,
    MembershipFactory,
    MessageFactory,
    ParticipantFactory,
    PassageFactory,
    UserFactory,
    WorkflowFactory,
    WorkspaceFactory,
)

pytestmark = pytest.mark.django_db

FEW, MANY = 3, 25


def workspace_with_everything(staff):
    """A workspace the staff account administers, with one row of every model."""
    workspace = WorkspaceFactory()
    WorkspaceSettings.objects.create(workspace=workspace)
    MembershipFactory(workspace=workspace, account=staff, role=Role.ADMINISTRATOR)
    member = MembershipFactory(workspace=workspace, role=Role.DEVELOPER)
    access_token_create(account=member.account, name="ci")
    bot = BotFactory(workspace=workspace)
    event = EventFactory(bot=bot)
    DeliveryAttempt.objects.create(
        event=event,
        bot=bot,
        number=1,
        started_at=timezone.now(),
        duration_ms=5,
        url="https://bot.example.test/hook",
        outcome=AttemptOutcome.RETRY,
    )
    PassageFactory(file__bot=bot)
    message = MessageFactory(conversation__bot=bot)
    message.conversation.owner = message.user
    message.conversation.save()
    ParticipantFactory(conversation=message.conversation, user=message.user)
    reader = UserFactory(bot=bot)
    MessageFeedback.objects.create(message=message, user=reader, value="positive")
    WorkflowFactory(bot=bot)
    InstallationFactory(bot=bot)
    ChatConnectionFactory(bot=bot)
    audit_record_add(
        Actor(account=staff, client_ip="10.0.0.1"),
        action=AuditAction.BOT_UPDATED,
        target_type="bot",
        target_id=bot.id,
        workspace=workspace,
        changes={"name": {"from": "a", "to": "b"}},
    )
    return workspace


def count_queries(client, url):
    # Once first, so that per-process caches (content types) are warm.
    client.get(url)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(queries)


def changelists(staff):
    """Every list the account may open: a scoped account, those of the scoped models."""
    for model, model_admin in admin.site._registry.items():
        if not staff.is_superuser and not isinstance(model_admin, WorkspaceScoped):
            continue
        meta = model._meta
        yield reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")


@pytest.fixture(params=["superuser", "scoped"])
def staff(request, client):
    account = AccountFactory(is_staff=True, is_superuser=request.param == "superuser")
    client.force_login(account)
    # The first page after signing in also updates the session.
    assert client.get("/admin/").status_code == 200
    return account


def test_changelists_do_not_grow_with_rows(client, staff):
    for _ in range(FEW):
        workspace_with_everything(staff)
    few = {url: count_queries(client, url) for url in changelists(staff)}
    for _ in range(MANY - FEW):
        workspace_with_everything(staff)
    many = {url: count_queries(client, url) for url in changelists(staff)}
    assert many == few


def test_workspace_page_does_not_grow_with_members_and_bots(client, staff):
    workspace = workspace_with_everything(staff)
    url = reverse("admin:bots_workspace_change", args=[workspace.pk])

    def grow_to(count):
        while workspace.memberships.count() < count:
            MembershipFactory(workspace=workspace)
        while workspace.bots.count() < count:
            EventFactory(bot=BotFactory(workspace=workspace))

    grow_to(FEW)
    few = count_queries(client, url)
    grow_to(MANY)
    assert count_queries(client, url) == few


def test_bot_page_does_not_grow_with_events_and_installations(client, staff):
    workspace = workspace_with_everything(staff)
    bot = workspace.bots.get()
    url = reverse("admin:bots_bot_change", args=[bot.pk])

    def grow_to(count):
        while bot.installations.count() < count:
            InstallationFactory(bot=bot)
        while bot.events.count() < count:
            EventFactory(bot=bot)

    grow_to(FEW)
    few = count_queries(client, url)
    grow_to(MANY)
    assert count_queries(client, url) == few
