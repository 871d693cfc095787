"""A staff account that is not a superuser sees and changes only the
workspaces it owns or administers, and what belongs to them."""

import pytest
from django.contrib import admin
from django.urls import reverse

from bots.actors import Actor
from bots.admin import WorkspaceScoped
from bots.models import AccessToken, AuditAction, AuditRecord, Bot, Membership, Role
from bots.services.audit_records import audit_record_add
from chat.models import ChatConnection
from tests.factories import AccountFactory, BotFactory, MembershipFactory, WorkspaceFactory
from tests.test_admin_site_queries import workspace_with_everything

pytestmark = pytest.mark.django_db


def scoped_admins():
    return [
        (model, model_admin)
        for model, model_admin in admin.site._registry.items()
        if isinstance(model_admin, WorkspaceScoped)
    ]


def url(model, kind, *args):
    meta = model._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_{kind}", args=args)


@pytest.fixture
def scoped(client):
    account = AccountFactory(is_staff=True)
    client.force_login(account)
    return account


@pytest.fixture
def mine(scoped):
    return workspace_with_everything(scoped)


@pytest.fixture
def theirs():
    outsider = AccountFactory(is_staff=True)
    return workspace_with_everything(outsider)


def listed(client, model):
    response = client.get(url(model, "changelist"))
    assert response.status_code == 200, model
    return {row.pk for row in response.context["cl"].result_list}


def rows_of(model_admin, workspace):
    """The rows of `workspace` by the model admin's own path to it."""
    return set(
        model_admin.model._default_manager.filter(
            **{f"{model_admin.workspace_path}__in": [workspace.pk]}
        ).values_list("pk", flat=True)
    )


def test_every_scoped_list_holds_only_the_managed_workspaces_rows(client, scoped, mine, theirs):
    for model, model_admin in scoped_admins():
        if model in (AccessToken, AuditRecord):
            continue
        expected = rows_of(model_admin, mine)
        assert expected, model
        assert rows_of(model_admin, theirs), model
        assert listed(client, model) == expected, model


def test_tokens_listed_are_those_of_members_and_its_own(client, scoped, mine, theirs):
    own = AccessToken.objects.create(account=scoped, prefix="bp_pat_own", token_hash="1" * 64)
    members = Membership.objects.filter(workspace=mine).values("account")
    expected = set(AccessToken.objects.filter(account__in=members).values_list("pk", flat=True))
    assert expected - {own.pk}
    assert listed(client, AccessToken) == expected | {own.pk}


def test_audit_records_listed_are_the_workspaces_and_its_own(client, scoped, mine, theirs):
    own = audit_record_add(
        Actor(account=scoped),
        action=AuditAction.TOKEN_CREATED,
        target_type="token",
        target_id=1,
        workspace=None,
    )
    expected = set(AuditRecord.objects.filter(workspace=mine).values_list("pk", flat=True))
    assert expected
    assert listed(client, AuditRecord) == expected | {own.pk}


def test_another_workspaces_objects_do_not_open_by_url(client, scoped, mine, theirs):
    for model, model_admin in scoped_admins():
        if model in (AccessToken, AuditRecord):
            continue
        for pk in rows_of(model_admin, theirs):
            for kind in ("change", "history"):
                response = client.get(url(model, kind, pk))
                # What Django answers for a missing object: back to the index.
                assert response.status_code == 302, (model, kind)
                assert response["Location"] == reverse("admin:index")
            # Where nobody may delete, the refusal comes before the lookup.
            assert client.get(url(model, "delete", pk)).status_code in (302, 403), model
        for pk in rows_of(model_admin, mine):
            assert client.get(url(model, "change", pk)).status_code == 200, model


def test_another_workspaces_token_and_audit_record_do_not_open(client, scoped, mine, theirs):
    members = Membership.objects.filter(workspace=theirs).exclude(role=Role.ADMINISTRATOR)
    token = AccessToken.objects.filter(account__in=members.values("account")).get()
    record = AuditRecord.objects.filter(workspace=theirs).first()
    for target in (token, record):
        response = client.get(url(type(target), "change", target.pk))
        assert response.status_code == 302
    response = client.post(url(AccessToken, "revoke", token.pk))
    assert response.status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


def test_forms_offer_and_accept_only_the_managed_workspaces(client, scoped, mine, theirs):
    page = client.get(url(Membership, "add"))
    choices = {value for value, _ in page.context["adminform"].form.fields["workspace"].choices}
    assert choices == {"", mine.pk}
    response = client.post(
        url(Membership, "add"),
        {"workspace": theirs.pk, "email": "new@example.test", "role": Role.VIEWER},
    )
    assert response.status_code == 200
    assert "workspace" in response.context["adminform"].form.errors
    assert not Membership.objects.filter(workspace=theirs, account__email="new@example.test")

    response = client.post(url(Bot, "add"), {"workspace": theirs.pk, "name": "Sneaky"})
    assert response.status_code == 200
    assert "workspace" in response.context["adminform"].form.errors
    assert not Bot.objects.filter(name="Sneaky").exists()

    connection = ChatConnection.objects.get(bot__workspace=mine)
    other_bot = Bot.objects.get(workspace=theirs)
    response = client.post(
        url(ChatConnection, "change", connection.pk),
        {
            "bot": other_bot.pk,
            "name": "moved",
            "encryption_key": connection.encryption_key,
            "user_key_mode": connection.user_key_mode,
        },
    )
    assert response.status_code == 200
    assert "bot" in response.context["adminform"].form.errors
    connection.refresh_from_db()
    assert connection.bot.workspace == mine


def test_autocomplete_offers_only_the_managed_workspaces(client, scoped, mine, theirs):
    response = client.get(
        reverse("admin:autocomplete"),
        {"app_label": "bots", "model_name": "bot", "field_name": "workspace", "term": ""},
    )
    assert response.status_code == 200
    assert {row["id"] for row in response.json()["results"]} == {mine.pk}


def test_a_superuser_sees_everything(client, mine, theirs):
    client.force_login(AccountFactory(is_staff=True, is_superuser=True))
    for model, model_admin in scoped_admins():
        if model in (AccessToken, AuditRecord):
            continue
        assert listed(client, model) == rows_of(model_admin, mine) | rows_of(model_admin, theirs)
    assert listed(client, AccessToken) == set(AccessToken.objects.values_list("pk", flat=True))
    assert listed(client, AuditRecord) == set(AuditRecord.objects.values_list("pk", flat=True))


@pytest.mark.parametrize("role", [Role.MANAGER, Role.DEVELOPER, Role.VIEWER, Role.BILLING])
def test_lesser_roles_see_nothing_of_the_workspace(client, role):
    staff = AccountFactory(is_staff=True)
    workspace = workspace_with_everything(AccountFactory())
    MembershipFactory(workspace=workspace, account=staff, role=role)
    client.force_login(staff)
    index = client.get(reverse("admin:index"))
    assert index.status_code == 200
    assert index.context["app_list"] == []
    for model, model_admin in scoped_admins():
        assert client.get(url(model, "changelist")).status_code == 403, model
        if model in (AccessToken, AuditRecord):
            continue
        for pk in list(rows_of(model_admin, workspace))[:1]:
            assert client.get(url(model, "change", pk)).status_code in (302, 403), model


def test_the_index_lists_the_scoped_models_only(client, scoped, mine):
    index = client.get(reverse("admin:index"))
    listed_models = {
        (app["app_label"], entry["object_name"])
        for app in index.context["app_list"]
        for entry in app["models"]
    }
    assert ("bots", "Bot") in listed_models
    assert ("bots", "Integration") not in listed_models
    assert ("auth", "User") not in listed_models


def test_only_a_superuser_adds_or_deletes_a_workspace(client, scoped, mine):
    assert client.get(reverse("admin:bots_workspace_add")).status_code == 403
    assert client.get(reverse("admin:bots_workspace_delete", args=[mine.pk])).status_code == 403


def test_a_disabled_account_loses_its_scope(client, scoped, mine):
    BotFactory(workspace=WorkspaceFactory())
    scoped.is_active = False
    scoped.save()
    response = client.get(url(Bot, "changelist"))
    assert response.status_code == 302
