"""Audit records outlive the workspace and the account they name: deleting
either keeps them, and the Django admin still lists, searches and shows them."""

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.urls import reverse

from bots.actors import Actor
from bots.models import AuditRecord
from bots.services.bots import bot_create
from bots.services.workspaces import workspace_create

pytestmark = pytest.mark.django_db


def test_records_outlive_their_workspace_and_actor(client):
    accounts = get_user_model().objects
    superuser = accounts.create_superuser("root", "root@example.test", "pw")
    departed = Actor(account=accounts.create_user("gone@example.test", "gone@example.test"))
    owner = accounts.create_user("owner@example.test", "owner@example.test")
    workspace = workspace_create(name="Doomed", owner=owner, actor=departed)
    bot_create(workspace=workspace, name="Bot", actor=departed)

    workspace.delete()
    assert departed.account is not None
    departed.account.delete()

    records = AuditRecord.objects.order_by("id")
    assert [r.actor_label for r in records] == ["gone@example.test"] * 2
    client.force_login(superuser)
    for url in (
        "/admin/bots/auditrecord/",
        "/admin/bots/auditrecord/?q=gone",
        reverse("admin:bots_auditrecord_change", args=[quote(records[0].pk)]),
    ):
        response = client.get(url)
        assert response.status_code == 200, url
        assert b"gone@example.test" in response.content, url
