"""What the admin pages write: every change goes through the services, so it
leaves its audit record (actor, client IP, changes); the owner rules show
as form errors; a new token's raw value is shown once."""

import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.urls import reverse
from django.utils import timezone
from ulid import ULID

from bots.actors import Actor
from bots.models import (
    AccessToken,
    AuditAction,
    AuditRecord,
    Bot,
    Membership,
    Role,
    Workspace,
    WorkspaceSettings,
)
from bots.services.audit_records import audit_record_add
from bots.services.tokens import access_token_create
from bots.token_checks import hash_token
from events.models import Event
from tests.factories import (
    AccountFactory,
    BotFactory,
    EventFactory,
    FileFactory,
    InstallationFactory,
    MembershipFactory,
    PassageFactory,
    WorkspaceFactory,
)

pytestmark = pytest.mark.django_db

IP = "203.0.113.7"
MEMBERSHIP_ADD = reverse("admin:bots_membership_add")
TOKEN_ADD = reverse("admin:bots_accesstoken_add")


@pytest.fixture
def client(client):
    client.defaults["REMOTE_ADDR"] = IP
    return client


@pytest.fixture
def workspace():
    workspace = WorkspaceFactory()
    WorkspaceSettings.objects.create(workspace=workspace)
    return workspace


def staff_of(client, workspace, role):
    account = AccountFactory(is_staff=True)
    MembershipFactory(workspace=workspace, account=account, role=role)
    client.force_login(account)
    return account


@pytest.fixture
def owner(client, workspace):
    return staff_of(client, workspace, Role.OWNER)


@pytest.fixture
def administrator(client, workspace):
    return staff_of(client, workspace, Role.ADMINISTRATOR)


@pytest.fixture
def superuser(client):
    account = AccountFactory(is_staff=True, is_superuser=True)
    client.force_login(account)
    return account


def last_record(action):
    return AuditRecord.objects.filter(action=action).latest("id")


def assert_recorded(action, actor, workspace=None, **changes):
    record = last_record(action)
    assert record.actor == actor
    assert record.actor_label == actor.email
    assert record.client_ip == IP
    assert record.workspace == workspace
    for name, value in changes.items():
        assert record.changes[name] == value, name
    return record


def page_data(response):
    """The form data the page would post as it is, inlines included."""
    forms = [response.context["adminform"].form]
    for inline in response.context["inline_admin_formsets"]:
        forms += [inline.formset.management_form, *inline.formset.forms]
    data = {}
    for form in forms:
        for name, field in form.fields.items():
            value = form[name].value()
            if field.disabled or value is None or value is False:
                continue
            data[form.add_prefix(name)] = "on" if value is True else value
    return data


def inline_prefix(response, model):
    for inline in response.context["inline_admin_formsets"]:
        if inline.formset.model is model:
            return inline.formset.prefix
    raise AssertionError(model)


def errors_of(response):
    """Every error on the page: the form's, and the inlines' (form and formset)."""
    assert response.status_code == 200, response.get("Location")
    found = [str(e) for e in response.context["adminform"].form.errors.values()]
    for inline in response.context["inline_admin_formsets"]:
        found += [str(e) for e in inline.formset.non_form_errors()]
        found += [str(e) for form in inline.formset.forms for e in form.errors.values()]
    return " ".join(found)


# --- the membership pages -----------------------------------------------------


def test_membership_add_page_has_workspace_email_and_role(client, administrator, workspace):
    page = client.get(MEMBERSHIP_ADD)
    assert page.status_code == 200
    assert list(page.context["adminform"].form.fields) == ["workspace", "email", "role"]
    html = page.content.decode()
    assert re.search(r'<select name="workspace"[^>]*>', html)
    assert re.search(r'<input type="email" name="email"', html)
    assert re.search(r'<select name="role"[^>]*>', html)


def test_adding_a_member_goes_through_the_service(client, administrator, workspace):
    response = client.post(
        MEMBERSHIP_ADD,
        {"workspace": workspace.pk, "email": "New@Example.test", "role": Role.DEVELOPER},
    )
    assert response.status_code == 302, errors_of(response)
    member = Membership.objects.get(workspace=workspace, account__email="New@Example.test")
    assert member.role == Role.DEVELOPER
    assert not member.account.has_usable_password()
    record = assert_recorded(
        AuditAction.MEMBER_ADDED, administrator, workspace, role=Role.DEVELOPER
    )
    assert record.target_id == str(member.pk)


def test_an_existing_account_is_added_not_duplicated(client, administrator, workspace):
    existing = AccountFactory(email="known@example.test")
    response = client.post(
        MEMBERSHIP_ADD, {"workspace": workspace.pk, "email": "KNOWN@example.test", "role": "viewer"}
    )
    assert response.status_code == 302
    assert Membership.objects.get(workspace=workspace, account=existing).role == Role.VIEWER


def test_an_administrator_cannot_add_an_owner(client, administrator, workspace):
    before = AuditRecord.objects.count()
    response = client.post(
        MEMBERSHIP_ADD, {"workspace": workspace.pk, "email": "boss@example.test", "role": "owner"}
    )
    assert "Only an owner" in errors_of(response)
    assert not Membership.objects.filter(account__email="boss@example.test").exists()
    assert not get_user_model().objects.filter(email="boss@example.test").exists()
    assert AuditRecord.objects.count() == before


def test_an_owner_can_add_an_owner(client, owner, workspace):
    response = client.post(
        MEMBERSHIP_ADD, {"workspace": workspace.pk, "email": "co@example.test", "role": "owner"}
    )
    assert response.status_code == 302
    assert Membership.objects.get(account__email="co@example.test").role == Role.OWNER


def test_adding_a_member_twice_is_a_form_error(client, administrator, workspace):
    member = MembershipFactory(workspace=workspace)
    response = client.post(
        MEMBERSHIP_ADD,
        {"workspace": workspace.pk, "email": member.account.email, "role": Role.VIEWER},
    )
    assert "a member already" in errors_of(response)
    member.refresh_from_db()
    assert member.role == Role.DEVELOPER


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"workspace": "wkspace_nope", "email": "a@example.test", "role": "viewer"},
        {"email": "not an address", "role": "viewer"},
        {"email": "a@example.test", "role": "emperor"},
    ],
)
def test_bad_membership_input_is_a_form_error(client, administrator, workspace, data):
    data = {"workspace": workspace.pk, **data} if "workspace" not in data and data else data
    response = client.post(MEMBERSHIP_ADD, data)
    assert errors_of(response)
    assert Membership.objects.count() == 1


def test_changing_a_role_goes_through_the_service(client, owner, workspace):
    member = MembershipFactory(workspace=workspace, role=Role.VIEWER)
    url = reverse("admin:bots_membership_change", args=[member.pk])
    page = client.get(url)
    assert list(page.context["adminform"].form.fields) == ["role"]
    response = client.post(url, {"role": Role.MANAGER})
    assert response.status_code == 302, errors_of(response)
    member.refresh_from_db()
    assert member.role == Role.MANAGER
    assert_recorded(
        AuditAction.MEMBER_ROLE_CHANGED,
        owner,
        workspace,
        role={"from": Role.VIEWER, "to": Role.MANAGER},
    )


def test_the_last_owner_cannot_be_demoted(client, owner, workspace):
    mine = Membership.objects.get(account=owner)
    response = client.post(
        reverse("admin:bots_membership_change", args=[mine.pk]), {"role": Role.VIEWER}
    )
    assert "at least one owner" in errors_of(response)
    mine.refresh_from_db()
    assert mine.role == Role.OWNER
    assert not AuditRecord.objects.filter(action=AuditAction.MEMBER_ROLE_CHANGED).exists()


def test_an_administrator_cannot_demote_an_owner(client, administrator, workspace):
    boss = MembershipFactory(workspace=workspace, role=Role.OWNER)
    MembershipFactory(workspace=workspace, role=Role.OWNER)
    response = client.post(
        reverse("admin:bots_membership_change", args=[boss.pk]), {"role": Role.VIEWER}
    )
    assert "Only an owner" in errors_of(response)
    boss.refresh_from_db()
    assert boss.role == Role.OWNER


def test_removing_a_member_goes_through_the_service(client, administrator, workspace):
    member = MembershipFactory(workspace=workspace, role=Role.VIEWER)
    url = reverse("admin:bots_membership_delete", args=[member.pk])
    assert client.get(url).status_code == 200
    response = client.post(url, {"post": "yes"})
    assert response.status_code == 302
    assert not Membership.objects.filter(pk=member.pk).exists()
    record = assert_recorded(AuditAction.MEMBER_REMOVED, administrator, workspace)
    assert record.changes == {"account": member.account.username, "role": Role.VIEWER}


def test_removing_the_last_owner_is_refused_on_the_page(client, workspace, superuser):
    only = MembershipFactory(workspace=workspace, role=Role.OWNER)
    url = reverse("admin:bots_membership_delete", args=[only.pk])
    response = client.post(url, {"post": "yes"}, follow=True)
    assert response.status_code == 200
    assert "at least one owner" in response.content.decode()
    assert Membership.objects.filter(pk=only.pk).exists()
    assert not AuditRecord.objects.filter(action=AuditAction.MEMBER_REMOVED).exists()


def test_bulk_removal_goes_through_the_service(client, owner, workspace):
    members = [MembershipFactory(workspace=workspace, role=Role.VIEWER) for _ in range(2)]
    mine = Membership.objects.get(account=owner)
    changelist = reverse("admin:bots_membership_changelist")
    offered = dict(client.get(changelist).context["action_form"].fields["action"].choices)
    assert "remove_selected" in offered and "delete_selected" not in offered
    response = client.post(
        changelist,
        {"action": "remove_selected", "_selected_action": [m.pk for m in [*members, mine]]},
        follow=True,
    )
    page = response.content.decode()
    assert "2 member(s) removed" in page
    assert "at least one owner" in page
    assert list(Membership.objects.filter(workspace=workspace)) == [mine]
    assert AuditRecord.objects.filter(action=AuditAction.MEMBER_REMOVED).count() == 2


# --- the workspace page -------------------------------------------------------


def workspace_page(client, workspace):
    url = reverse("admin:bots_workspace_change", args=[workspace.pk])
    page = client.get(url)
    assert page.status_code == 200
    return url, page


def test_members_inline_adds_changes_and_removes_through_the_service(client, owner, workspace):
    viewer = MembershipFactory(workspace=workspace, role=Role.VIEWER)
    leaving = MembershipFactory(workspace=workspace, role=Role.DEVELOPER)
    url, page = workspace_page(client, workspace)
    data = page_data(page)
    prefix = inline_prefix(page, Membership)
    rows = {
        form.instance.pk: i
        for i, form in enumerate(page.context["inline_admin_formsets"][0].formset.forms)
    }
    data[f"{prefix}-{rows[viewer.pk]}-role"] = Role.MANAGER
    data[f"{prefix}-{rows[leaving.pk]}-DELETE"] = "on"
    new = int(data[f"{prefix}-TOTAL_FORMS"])
    data[f"{prefix}-TOTAL_FORMS"] = new + 1
    data[f"{prefix}-{new}-email"] = "joiner@example.test"
    data[f"{prefix}-{new}-role"] = Role.DEVELOPER
    data[f"{prefix}-{new}-workspace"] = workspace.pk
    response = client.post(url, data)
    assert response.status_code == 302, errors_of(response)
    viewer.refresh_from_db()
    assert viewer.role == Role.MANAGER
    assert not Membership.objects.filter(pk=leaving.pk).exists()
    assert Membership.objects.get(account__email="joiner@example.test").role == Role.DEVELOPER
    assert_recorded(AuditAction.MEMBER_ADDED, owner, workspace, role=Role.DEVELOPER)
    assert_recorded(
        AuditAction.MEMBER_ROLE_CHANGED, owner, workspace, role={"from": "viewer", "to": "manager"}
    )
    assert_recorded(AuditAction.MEMBER_REMOVED, owner, workspace, role=Role.DEVELOPER)


def test_a_refused_inline_change_saves_nothing(client, owner, workspace):
    url, page = workspace_page(client, workspace)
    data = page_data(page)
    prefix = inline_prefix(page, Membership)
    data["name"] = "Renamed"
    # Demoting the only owner is refused; the addition beside it is not made.
    data[f"{prefix}-0-role"] = Role.VIEWER
    data[f"{prefix}-TOTAL_FORMS"] = 2
    data[f"{prefix}-1-email"] = "joiner@example.test"
    data[f"{prefix}-1-role"] = Role.DEVELOPER
    before = AuditRecord.objects.count()
    response = client.post(url, data)
    assert "at least one owner" in errors_of(response)
    workspace.refresh_from_db()
    assert workspace.name != "Renamed"
    assert not Membership.objects.filter(account__email="joiner@example.test").exists()
    assert Membership.objects.get(account=owner).role == Role.OWNER
    assert AuditRecord.objects.count() == before


def test_handing_over_ownership_in_one_submit(client, owner, workspace):
    heir = MembershipFactory(workspace=workspace, role=Role.MANAGER)
    url, page = workspace_page(client, workspace)
    data = page_data(page)
    prefix = inline_prefix(page, Membership)
    forms = page.context["inline_admin_formsets"][0].formset.forms
    rows = {form.instance.pk: i for i, form in enumerate(forms)}
    # The owner steps down in the row before the heir's promotion: promotions run first.
    data[f"{prefix}-{rows[Membership.objects.get(account=owner).pk]}-role"] = Role.ADMINISTRATOR
    data[f"{prefix}-{rows[heir.pk]}-role"] = Role.OWNER
    response = client.post(url, data)
    assert response.status_code == 302, errors_of(response)
    heir.refresh_from_db()
    assert heir.role == Role.OWNER
    assert Membership.objects.get(account=owner).role == Role.ADMINISTRATOR


def test_an_inline_duplicate_member_is_a_form_error(client, owner, workspace):
    member = MembershipFactory(workspace=workspace)
    url, page = workspace_page(client, workspace)
    data = page_data(page)
    prefix = inline_prefix(page, Membership)
    new = int(data[f"{prefix}-TOTAL_FORMS"])
    data[f"{prefix}-TOTAL_FORMS"] = new + 1
    data[f"{prefix}-{new}-email"] = member.account.email
    data[f"{prefix}-{new}-role"] = Role.VIEWER
    assert "a member already" in errors_of(client.post(url, data))


def test_settings_inline_saves_through_the_service(client, administrator, workspace):
    url, page = workspace_page(client, workspace)
    data = page_data(page)
    prefix = inline_prefix(page, WorkspaceSettings)
    data[f"{prefix}-0-event_retention_days"] = 7
    data[f"{prefix}-0-display_name"] = "Support"
    response = client.post(url, data)
    assert response.status_code == 302, errors_of(response)
    assert WorkspaceSettings.objects.get(pk=workspace.pk).event_retention_days == 7
    record = assert_recorded(AuditAction.SETTINGS_CHANGED, administrator, workspace)
    assert record.changes == {
        "event_retention_days": {"from": 30, "to": 7},
        "display_name": {"from": "", "to": "Support"},
    }


def test_settings_out_of_range_are_a_form_error(client, administrator, workspace):
    url, page = workspace_page(client, workspace)
    data = page_data(page)
    prefix = inline_prefix(page, WorkspaceSettings)
    data[f"{prefix}-0-event_retention_days"] = 0
    data[f"{prefix}-0-webhook_timeout_seconds"] = 61
    assert errors_of(client.post(url, data))
    assert not AuditRecord.objects.filter(action=AuditAction.SETTINGS_CHANGED).exists()


def test_bots_inline_saves_through_the_services(client, administrator, workspace):
    kept = BotFactory(workspace=workspace, name="Kept")
    dropped = BotFactory(workspace=workspace, name="Dropped")
    url, page = workspace_page(client, workspace)
    data = page_data(page)
    prefix = inline_prefix(page, Bot)
    forms = [i for i in page.context["inline_admin_formsets"] if i.formset.model is Bot][0]
    rows = {form.instance.pk: i for i, form in enumerate(forms.formset.forms)}
    data[f"{prefix}-{rows[kept.pk]}-webhook_url"] = "https://hooks.example.test/kept"
    data[f"{prefix}-{rows[dropped.pk]}-DELETE"] = "on"
    new = int(data[f"{prefix}-TOTAL_FORMS"])
    data[f"{prefix}-TOTAL_FORMS"] = new + 1
    data[f"{prefix}-{new}-name"] = "Fresh"
    data[f"{prefix}-{new}-workspace"] = workspace.pk
    response = client.post(url, data)
    assert response.status_code == 302, errors_of(response)
    assert_recorded(
        AuditAction.BOT_UPDATED,
        administrator,
        workspace,
        webhook_url={"from": "", "to": "https://hooks.example.test/kept"},
    )
    assert_recorded(AuditAction.BOT_DELETED, administrator, workspace, name="Dropped")
    fresh = Bot.objects.get(name="Fresh")
    assert assert_recorded(AuditAction.BOT_CREATED, administrator, workspace).target_id == fresh.id
    assert not Bot.objects.filter(pk=dropped.pk).exists()


def test_workspace_page_shows_usage(client, administrator, workspace):
    bot = BotFactory(workspace=workspace)
    BotFactory(workspace=workspace)
    EventFactory.create_batch(3, bot=bot)
    PassageFactory.create_batch(2, file=FileFactory(bot=bot))
    FileFactory(bot=bot)
    elsewhere = BotFactory()
    EventFactory(bot=elsewhere)
    FileFactory(bot=elsewhere)
    yesterday = timezone.now() - timedelta(days=1)
    old = EventFactory(bot=bot, id=f"evt_{ULID.from_datetime(yesterday)}")
    Event.objects.filter(pk=old.pk).update(created_at=yesterday)
    _, page = workspace_page(client, workspace)
    html = page.content.decode()
    for line in ("bots: 2", "events created today: 3", "files: 2", "passages: 2"):
        assert f"<li>{line}</li>" in html


def test_a_superuser_makes_a_workspace_through_the_service(client, superuser):
    page = client.get(reverse("admin:bots_workspace_add"))
    assert list(page.context["adminform"].form.fields) == ["name", "owner"]
    response = client.post(
        reverse("admin:bots_workspace_add"), {"name": "Acme", "owner": "founder@example.test"}
    )
    assert response.status_code == 302, errors_of(response)
    workspace = Workspace.objects.get(name="Acme")
    assert Membership.objects.get(workspace=workspace).role == Role.OWNER
    assert WorkspaceSettings.objects.filter(workspace=workspace).exists()
    assert_recorded(AuditAction.MEMBER_ADDED, superuser, workspace, role=Role.OWNER)


# --- the bot pages -------------------------------------------------------------


def test_a_bot_is_made_edited_and_deleted_through_the_services(client, administrator, workspace):
    response = client.post(
        reverse("admin:bots_bot_add"),
        {
            "workspace": workspace.pk,
            "name": "Helper",
            "tags": "{}",
            "webhook_url": "hooks.test/a",
            "delivery_format": "standard",
            "configuration": "{}",
        },
    )
    assert response.status_code == 302, errors_of(response)
    bot = Bot.objects.get(name="Helper")
    assert bot.webhook_url == "https://hooks.test/a"
    assert assert_recorded(AuditAction.BOT_CREATED, administrator, workspace).target_id == bot.id

    url = reverse("admin:bots_bot_change", args=[bot.pk])
    data = page_data(client.get(url))
    data["webhook_url"] = "https://hooks.test/b"
    response = client.post(url, data)
    assert response.status_code == 302, errors_of(response)
    record = assert_recorded(AuditAction.BOT_UPDATED, administrator, workspace)
    assert record.changes == {
        "webhook_url": {"from": "https://hooks.test/a", "to": "https://hooks.test/b"}
    }

    data = page_data(client.get(url))
    data.update(delivery_format="botpress", max_execution_time="120", configuration='{"a": 1}')
    assert client.post(url, data).status_code == 302
    bot.refresh_from_db()
    assert (bot.delivery_format, bot.max_execution_time, bot.configuration) == (
        "botpress",
        120,
        {"a": 1},
    )
    data = page_data(client.get(url))
    data["configuration"] = '{"k": "' + "x" * 9000 + '"}'
    assert "bytes of JSON" in errors_of(client.post(url, data))

    response = client.post(reverse("admin:bots_bot_delete", args=[bot.pk]), {"post": "yes"})
    assert response.status_code == 302
    assert not Bot.objects.filter(pk=bot.pk).exists()
    assert_recorded(AuditAction.BOT_DELETED, administrator, workspace, name="Helper")


def test_bulk_delete_of_bots_goes_through_the_service(client, administrator, workspace):
    bots = BotFactory.create_batch(2, workspace=workspace)
    response = client.post(
        reverse("admin:bots_bot_changelist"),
        {"action": "delete_selected", "_selected_action": [b.pk for b in bots], "post": "yes"},
    )
    assert response.status_code == 302
    assert not Bot.objects.filter(workspace=workspace).exists()
    assert AuditRecord.objects.filter(action=AuditAction.BOT_DELETED).count() == 2


def test_a_bad_webhook_url_is_a_form_error(client, administrator, workspace):
    bot = BotFactory(workspace=workspace)
    url = reverse("admin:bots_bot_change", args=[bot.pk])
    data = page_data(client.get(url))
    data["webhook_url"] = "ftp://hooks.test/a"
    assert errors_of(client.post(url, data))
    assert not AuditRecord.objects.filter(action=AuditAction.BOT_UPDATED).exists()


def test_rotating_the_secret_from_the_page_and_the_action(client, administrator, workspace):
    bot = BotFactory(workspace=workspace)
    secret = bot.signing_secret
    page = client.get(reverse("admin:bots_bot_change", args=[bot.pk]))
    assert 'id="rotate-signing-secret"' in page.content.decode()
    response = client.post(reverse("admin:bots_bot_rotate_signing_secret", args=[bot.pk]))
    assert response.status_code == 302
    bot.refresh_from_db()
    assert bot.signing_secret != secret
    assert bot.previous_signing_secret == secret
    assert_recorded(AuditAction.BOT_SECRET_ROTATED, administrator, workspace)

    client.post(
        reverse("admin:bots_bot_changelist"),
        {"action": "rotate_signing_secret", "_selected_action": [bot.pk]},
    )
    assert AuditRecord.objects.filter(action=AuditAction.BOT_SECRET_ROTATED).count() == 2
    assert (
        client.get(reverse("admin:bots_bot_rotate_signing_secret", args=[bot.pk])).status_code
        == 405
    )


def test_bot_page_shows_recent_events_and_installations(client, administrator, workspace):
    bot = BotFactory(workspace=workspace)
    events = [EventFactory(bot=bot, type=f"kind.{n}") for n in range(22)]
    installation = InstallationFactory(bot=bot, alias="crm")
    html = client.get(reverse("admin:bots_bot_change", args=[bot.pk])).content.decode()
    shown = re.findall(r'href="/admin/events/event/(evt_\w+)/change/"', html)
    assert shown == [e.id for e in sorted(events, key=lambda e: e.id, reverse=True)][:20]
    assert "kind.21" in html and "kind.0<" not in html
    assert installation.alias in html
    assert str(installation.integration) in html


# --- tokens --------------------------------------------------------------------


def test_token_add_page_has_email_name_and_expiry(client, administrator):
    page = client.get(TOKEN_ADD)
    assert list(page.context["adminform"].form.fields) == ["email", "name", "expires_in_days"]


def test_a_token_is_made_and_its_raw_value_shown_once(client, administrator, workspace):
    member = MembershipFactory(workspace=workspace)
    response = client.post(
        TOKEN_ADD, {"email": member.account.email, "name": "deploy", "expires_in_days": 30}
    )
    assert response.status_code == 302, errors_of(response)
    sessions_after_saving = [str(s.get_decoded()) for s in Session.objects.all()]
    token = AccessToken.objects.get(account=member.account)
    assert response["Location"] == reverse("admin:bots_accesstoken_change", args=[token.pk])
    page = client.get(response["Location"]).content.decode()
    raw = re.search(r'<code id="raw-token">([^<]+)</code>', page).group(1)
    assert hash_token(raw) == token.token_hash
    assert "will not be shown again" in page
    # It travelled in a short-lived cookie of this browser, never through the
    # session, whose rows are in the database.
    cookie = response.cookies[f"raw_token_{token.pk}"]
    assert cookie["httponly"] and cookie["samesite"] == "Strict"
    assert cookie["path"] == response["Location"]
    assert sessions_after_saving and not any(raw in data for data in sessions_after_saving)
    again = client.get(response["Location"]).content.decode()
    assert 'id="raw-token"' not in again and raw not in again
    assert token.expires_at is not None
    assert_recorded(
        AuditAction.TOKEN_CREATED, administrator, None, name="deploy", prefix=token.prefix
    )


def test_a_token_for_an_account_outside_the_workspaces_is_refused(client, administrator):
    stranger = MembershipFactory()
    response = client.post(TOKEN_ADD, {"email": stranger.account.email, "name": "x"})
    assert "No account you manage" in errors_of(response)
    response = client.post(TOKEN_ADD, {"email": "nobody@example.test", "name": "x"})
    assert "No account you manage" in errors_of(response)
    assert not AccessToken.objects.exists()


def test_a_staff_account_makes_its_own_token(client, administrator):
    response = client.post(TOKEN_ADD, {"email": administrator.email, "name": "mine"})
    assert response.status_code == 302
    assert AccessToken.objects.get().account == administrator


@pytest.mark.parametrize("days", ["0", "3651", "-1", "soon"])
def test_a_token_expiry_out_of_range_is_a_form_error(client, administrator, days):
    response = client.post(TOKEN_ADD, {"email": administrator.email, "expires_in_days": days})
    assert "expires_in_days" in response.context["adminform"].form.errors
    assert not AccessToken.objects.exists()


def test_revoking_from_the_page_and_the_action(client, administrator, workspace):
    first, _ = access_token_create(account=administrator, name="a")
    second, _ = access_token_create(account=administrator, name="b")
    url = reverse("admin:bots_accesstoken_change", args=[first.pk])
    assert 'id="revoke-token"' in client.get(url).content.decode()
    response = client.post(reverse("admin:bots_accesstoken_revoke", args=[first.pk]))
    assert response.status_code == 302
    first.refresh_from_db()
    assert first.revoked_at is not None
    assert_recorded(AuditAction.TOKEN_REVOKED, administrator, None, prefix=first.prefix)
    assert 'id="revoke-token"' not in client.get(url).content.decode()

    response = client.post(
        reverse("admin:bots_accesstoken_changelist"),
        {"action": "revoke_selected", "_selected_action": [first.pk, second.pk]},
        follow=True,
    )
    assert "1 token(s) revoked; 1 already were" in response.content.decode()
    assert AuditRecord.objects.filter(action=AuditAction.TOKEN_REVOKED).count() == 2


def test_a_token_is_never_renamed_or_deleted(client, superuser):
    token, _ = access_token_create(account=superuser, name="a")
    url = reverse("admin:bots_accesstoken_change", args=[token.pk])
    response = client.post(url, {"name": "renamed", "rate_limit_per_minute": "90"})
    assert response.status_code == 302
    assert client.get(reverse("admin:bots_accesstoken_delete", args=[token.pk])).status_code == 403
    token.refresh_from_db()
    assert token.name == "a"
    # Its ceiling is what a superuser may change, and that is recorded.
    assert token.rate_limit_per_minute == 90
    assert_recorded(AuditAction.TOKEN_RATE_LIMIT_CHANGED, superuser, None)


def test_only_a_superuser_sets_a_token_ceiling(client, administrator):
    token, _ = access_token_create(account=administrator, name="a")
    url = reverse("admin:bots_accesstoken_change", args=[token.pk])
    assert client.post(url, {"rate_limit_per_minute": "90"}).status_code == 403
    token.refresh_from_db()
    assert token.rate_limit_per_minute is None


def test_token_filters(client, superuser):
    live, _ = access_token_create(account=superuser, name="live", expires_in_days=3)
    gone, _ = access_token_create(account=superuser, name="gone")
    AccessToken.objects.filter(pk=gone.pk).update(revoked_at=live.created_at)
    changelist = reverse("admin:bots_accesstoken_changelist")

    def names(**query):
        response = client.get(changelist, query)
        return {t.name for t in response.context["cl"].result_list}

    assert names(revoked="yes") == {"gone"}
    assert names(revoked="no") == {"live"}
    assert names(expired="no") == {"live", "gone"}
    assert names(expired="yes") == set()


# --- audit records -------------------------------------------------------------


def test_audit_records_are_view_only_with_pretty_changes(client, administrator, workspace):
    member = MembershipFactory(workspace=workspace, role=Role.VIEWER)
    client.post(reverse("admin:bots_membership_change", args=[member.pk]), {"role": Role.DEVELOPER})
    record = last_record(AuditAction.MEMBER_ROLE_CHANGED)
    changelist = reverse("admin:bots_auditrecord_changelist")
    listing = client.get(changelist)
    assert listing.status_code == 200
    assert client.get(reverse("admin:bots_auditrecord_add")).status_code == 403
    url = reverse("admin:bots_auditrecord_change", args=[record.pk])
    page = client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    pretty = json.dumps(record.changes, indent=2, sort_keys=True)
    assert pretty.replace('"', "&quot;") in html
    assert client.post(url, {"action": "x"}).status_code == 403
    assert (
        client.post(reverse("admin:bots_auditrecord_delete", args=[record.pk])).status_code == 403
    )


def test_audit_records_filter_and_search(client, administrator, workspace):
    other_actor = MembershipFactory(workspace=workspace, role=Role.OWNER).account
    member = MembershipFactory(workspace=workspace, role=Role.VIEWER)
    client.post(reverse("admin:bots_membership_change", args=[member.pk]), {"role": Role.DEVELOPER})
    audit_record_add(
        Actor(account=other_actor),
        action=AuditAction.BOT_UPDATED,
        target_type="bot",
        target_id="bot_x",
        workspace=workspace,
    )
    changelist = reverse("admin:bots_auditrecord_changelist")

    def actions(**query):
        response = client.get(changelist, query)
        assert response.status_code == 200
        return [r.action for r in response.context["cl"].result_list]

    assert actions(action=AuditAction.BOT_UPDATED) == [AuditAction.BOT_UPDATED]
    assert actions(actor=str(other_actor.pk)) == [AuditAction.BOT_UPDATED]
    assert actions(actor=str(administrator.pk)) == [AuditAction.MEMBER_ROLE_CHANGED]
    assert actions(q="bot_x") == [AuditAction.BOT_UPDATED]
    assert len(actions(q=workspace.name)) == 2
    assert actions(workspace__id__exact=workspace.pk) == actions()
    filters = client.get(changelist).content.decode()
    assert other_actor.email in filters
    assert client.get(changelist, {"actor": "nonsense"}).status_code in (200, 302)
