"""The Django admin works behind BrowserPagesOnly: login, every model's list
and add pages, and search."""

import pytest
from django.contrib import admin
from django.urls import reverse

from bots.admin import WorkspaceScoped
from bots.models import Role
from tests.factories import (
    AccountFactory,
    BotFactory,
    ConversationFactory,
    EventFactory,
    FileFactory,
    MembershipFactory,
    MessageFactory,
    PassageFactory,
)

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-admin-password"


@pytest.fixture
def staff(client):
    account = AccountFactory(is_staff=True, is_superuser=True)
    account.set_password(PASSWORD)
    account.save()
    return account


def test_login_with_password_sets_a_session(client, staff):
    response = client.get("/admin/login/")
    assert response.status_code == 200
    assert "csrftoken" in response.cookies
    response = client.post(
        "/admin/login/?next=/admin/",
        {"username": staff.username, "password": PASSWORD, "next": "/admin/"},
    )
    assert response.status_code == 302, response.content
    assert response["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200


def test_anonymous_is_sent_to_login(client):
    response = client.get("/admin/")
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_admin_pages_carry_frame_options(client, staff):
    client.force_login(staff)
    assert client.get("/admin/")["X-Frame-Options"] == "DENY"


def test_api_answers_carry_no_session_cookie(client, staff):
    client.force_login(staff)
    response = client.get("/healthz")
    assert response.status_code == 200
    assert "sessionid" not in response.cookies


def test_every_model_list_add_and_search_page_renders(client, staff):
    client.force_login(staff)
    MembershipFactory()
    BotFactory(tags={"env": "prod"})
    MessageFactory(conversation=ConversationFactory())
    EventFactory()
    PassageFactory(file=FileFactory())
    for model, model_admin in admin.site._registry.items():
        meta = model._meta
        changelist = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
        response = client.get(changelist)
        assert response.status_code == 200, changelist
        if model_admin.search_fields:
            assert client.get(changelist, {"q": "x"}).status_code == 200, changelist
        if model_admin.has_add_permission(response.wsgi_request):
            add = reverse(f"admin:{meta.app_label}_{meta.model_name}_add")
            assert client.get(add).status_code == 200, add


def test_every_scoped_page_renders_for_a_workspace_administrator(client):
    account = AccountFactory(is_staff=True)
    membership = MembershipFactory(account=account, role=Role.ADMINISTRATOR)
    bot = BotFactory(workspace=membership.workspace, tags={"env": "prod"})
    MessageFactory(conversation=ConversationFactory(bot=bot))
    EventFactory(bot=bot)
    PassageFactory(file=FileFactory(bot=bot))
    client.force_login(account)
    assert client.get("/admin/").status_code == 200
    for model, model_admin in admin.site._registry.items():
        if not isinstance(model_admin, WorkspaceScoped):
            continue
        meta = model._meta
        changelist = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
        response = client.get(changelist)
        assert response.status_code == 200, changelist
        assert client.get(changelist, {"q": "x"}).status_code == 200, changelist
        for row in response.context["cl"].result_list:
            change = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[row.pk])
            assert client.get(change).status_code == 200, change
        if model_admin.has_add_permission(response.wsgi_request):
            add = reverse(f"admin:{meta.app_label}_{meta.model_name}_add")
            assert client.get(add).status_code == 200, add


def test_static_files_are_served(client):
    response = client.get("/static/admin/css/base.css")
    assert response.status_code == 200
