"""The services write one audit record per change that matters, in the
change's own transaction, and the records cannot be changed afterwards."""

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ValidationError
from django.test import RequestFactory

from bots.actors import PLATFORM, Actor, actor_of
from bots.models import (
    AccessToken,
    AppendOnlyError,
    AuditAction,
    AuditRecord,
    Bot,
    Role,
    WorkspaceSettings,
)
from bots.selectors.workspace_settings import workspace_settings_get
from bots.services.bots import bot_create, bot_delete, bot_signing_secret_rotate, bot_update
from bots.services.tokens import access_token_create, access_token_revoke
from bots.services.workspace_settings import workspace_settings_update
from bots.services.workspaces import workspace_create
from platform_site.foundation.domain_errors import InvalidValue
from tests.factories import AccountFactory, BotFactory, WorkspaceFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff() -> Actor:
    return Actor(account=AccountFactory(username="staff@example.test"), client_ip="203.0.113.9")


def only_record(**filters: Any) -> AuditRecord:
    [record] = AuditRecord.objects.filter(**filters)
    return record


def test_a_new_workspace_has_settings_and_records_its_first_owner(staff):
    owner = AccountFactory()
    workspace = workspace_create(name="Acme", owner=owner, actor=staff)
    assert WorkspaceSettings.objects.filter(workspace=workspace).exists()
    record = only_record(workspace=workspace)
    assert record.action == AuditAction.MEMBER_ADDED
    assert record.actor == staff.account
    assert record.actor_label == "staff@example.test"
    assert record.client_ip == "203.0.113.9"
    assert record.changes == {"account": owner.username, "role": Role.OWNER}


def test_bot_create_update_delete_and_rotation_are_recorded(staff):
    workspace = WorkspaceFactory()
    bot = bot_create(workspace=workspace, name="Helper", tags={"env": "prod"}, actor=staff)
    created = only_record(action=AuditAction.BOT_CREATED)
    assert (created.target_type, created.target_id, created.workspace) == ("bot", bot.id, workspace)
    assert created.changes["name"] == {"from": None, "to": "Helper"}

    bot_update(bot=bot, name="Helper 2", webhook_url="https://bot.example.test/", actor=staff)
    updated = only_record(action=AuditAction.BOT_UPDATED)
    assert updated.changes == {
        "name": {"from": "Helper", "to": "Helper 2"},
        "webhook_url": {"from": "", "to": "https://bot.example.test/"},
    }

    bot_update(bot=bot, name="Helper 2", actor=staff)  # nothing changes
    assert AuditRecord.objects.filter(action=AuditAction.BOT_UPDATED).count() == 1

    old_secret = bot.signing_secret
    bot_signing_secret_rotate(bot=bot, actor=staff)
    rotated = only_record(action=AuditAction.BOT_SECRET_ROTATED)
    assert old_secret not in str(rotated.changes)
    assert bot.signing_secret not in str(rotated.changes)

    bot_id = bot.id
    bot_delete(bot=bot, actor=staff)
    deleted = only_record(action=AuditAction.BOT_DELETED)
    assert deleted.changes == {"name": "Helper 2"}
    assert not Bot.objects.filter(pk=bot_id).exists()
    # The records outlive the bot.
    assert AuditRecord.objects.filter(target_id=bot_id).count() == 4


def test_an_invalid_bot_update_writes_nothing(staff):
    bot = BotFactory(name="Kept")
    with pytest.raises(InvalidValue, match="webhook_url"):
        bot_update(bot=bot, webhook_url="ftp://nope.example.test/", actor=staff)
    bot.refresh_from_db()
    assert bot.webhook_url == ""
    assert not AuditRecord.objects.filter(action=AuditAction.BOT_UPDATED).exists()


def test_bot_update_refuses_fields_it_does_not_own():
    with pytest.raises(TypeError):
        bot_update(bot=BotFactory(), signing_secret="whsec_x")


def test_tokens_created_and_revoked_once(staff):
    account = AccountFactory()
    token, raw = access_token_create(account=account, name="ci", expires_in_days=7, actor=staff)
    created = only_record(action=AuditAction.TOKEN_CREATED)
    assert created.workspace is None
    assert (created.target_type, created.target_id) == ("token", str(token.pk))
    assert created.changes["prefix"] == token.prefix
    assert created.changes["expiresAt"] is not None
    assert raw not in str(created.changes)

    access_token_revoke(token=token, actor=staff)
    access_token_revoke(token=AccessToken.objects.get(pk=token.pk), actor=staff)
    assert only_record(action=AuditAction.TOKEN_REVOKED).actor == staff.account


def test_settings_changes_are_recorded_with_what_changed(staff):
    workspace = WorkspaceFactory()  # made without settings: the defaults arrive on first read
    record = workspace_settings_get(workspace)
    assert record.event_retention_days == 30
    record.event_retention_days = 7
    record.display_name = "Acme support"
    workspace_settings_update(record=record, actor=staff)
    changed = only_record(action=AuditAction.SETTINGS_CHANGED)
    assert changed.changes == {
        "display_name": {"from": "", "to": "Acme support"},
        "event_retention_days": {"from": 30, "to": 7},
    }
    workspace_settings_update(record=record, actor=staff)  # unchanged
    assert AuditRecord.objects.filter(action=AuditAction.SETTINGS_CHANGED).count() == 1


def test_invalid_settings_are_refused_and_nothing_is_recorded(staff):
    record = workspace_settings_get(WorkspaceFactory())
    record.webhook_timeout_seconds = 600
    with pytest.raises(ValidationError):
        workspace_settings_update(record=record, actor=staff)
    assert WorkspaceSettings.objects.get(pk=record.pk).webhook_timeout_seconds != 600
    assert not AuditRecord.objects.filter(action=AuditAction.SETTINGS_CHANGED).exists()


def test_records_are_append_only():
    bot_create(workspace=WorkspaceFactory(), name="Bot", actor=PLATFORM)
    record = AuditRecord.objects.get()
    record.action = AuditAction.BOT_DELETED
    with pytest.raises(AppendOnlyError):
        record.save()
    with pytest.raises(AppendOnlyError):
        record.delete()
    with pytest.raises(AppendOnlyError):
        AuditRecord.objects.filter(pk=record.pk).update(action=AuditAction.BOT_DELETED)
    with pytest.raises(AppendOnlyError):
        AuditRecord.objects.all().delete()
    assert AuditRecord.objects.get().action == AuditAction.BOT_CREATED


def test_the_platform_is_the_actor_of_commands():
    bot_create(workspace=WorkspaceFactory(), name="Bot")
    record = AuditRecord.objects.get()
    assert (record.actor, record.actor_label, record.client_ip) == (None, "platform", None)


@pytest.mark.parametrize(
    ("remote_addr", "expected"),
    [("198.51.100.7", "198.51.100.7"), ("2001:db8::1", "2001:db8::1"), ("not an ip", None)],
)
def test_actor_of_a_request(remote_addr, expected):
    account = get_user_model().objects.create_user(username="someone")
    request = RequestFactory().get("/", REMOTE_ADDR=remote_addr)
    request.user = account
    assert actor_of(request) == Actor(account=account, client_ip=expected)


def test_an_anonymous_request_has_no_account():
    request = RequestFactory().get("/")
    request.user = AnonymousUser()
    assert actor_of(request).account is None
