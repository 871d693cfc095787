"""GET, POST, PUT and DELETE /v1/admin/bots[/{id}]: the bot's shape, the
closed body, tenant scoping and the audit records each write leaves."""

from datetime import UTC, datetime
from typing import Any

import pytest

from bots.models import AuditAction, AuditRecord, Bot, Role
from events.models import Event
from tests.conftest import admin_api, assert_error
from tests.factories import (
    BotFactory,
    EventFactory,
    InstallationFactory,
    IntegrationFactory,
    MembershipFactory,
    WorkspaceFactory,
    token_for,
)

pytestmark = pytest.mark.django_db

URL = "/v1/admin/bots"
MISSING_BOT = "bot_01J0000000000000000000000X"


@pytest.fixture
def membership(workspace):
    return MembershipFactory(workspace=workspace, role=Role.DEVELOPER)


@pytest.fixture
def client(workspace, membership):
    return admin_api(token_for(membership.account), workspace.id)


def bot_records() -> Any:
    """Records of changes to bots (making the client's token leaves one too)."""
    return AuditRecord.objects.filter(target_type="bot")


def bot_of(response: Any, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"bot"}
    return body["bot"]


def create(client: Any, body: dict[str, Any]) -> dict[str, Any]:
    return bot_of(client.post(URL, body, format="json"), 201)


# --- read -------------------------------------------------------------------------


def test_get_a_bot_with_everything_set(client, workspace):
    bot = BotFactory(
        workspace=workspace,
        name="Support",
        tags={"env": "prod"},
        dev=True,
        webhook_url="https://hooks.example.test/in",
        deployed_at=datetime(2026, 3, 4, 5, 6, 7, 891000, tzinfo=UTC),
    )
    crm = IntegrationFactory(name="crm", version="1.2.0")
    InstallationFactory(bot=bot, integration=crm, alias="sales", enabled=False)
    InstallationFactory(bot=bot, integration=IntegrationFactory(name="mail"), alias="mail")
    body = bot_of(client.get(f"{URL}/{bot.id}"))
    assert set(body) == {
        "id",
        "createdAt",
        "updatedAt",
        "name",
        "tags",
        "dev",
        "deployedAt",
        "url",
        "webhookUrl",
        "deliveryFormat",
        "configuration",
        "integrations",
    }
    assert body["id"] == bot.id
    assert body["name"] == "Support"
    assert body["tags"] == {"env": "prod"}
    assert body["dev"] is True
    assert body["deployedAt"] == "2026-03-04T05:06:07.891Z"
    assert body["url"] == body["webhookUrl"] == "https://hooks.example.test/in"
    assert body["integrations"]["sales"] == {
        "id": crm.id,
        "name": "crm",
        "version": "1.2.0",
        "enabled": False,
    }
    assert body["integrations"]["mail"]["enabled"] is True
    assert set(body["integrations"]) == {"sales", "mail"}


def test_optional_fields_that_are_not_set_are_left_out(client, workspace):
    bot = BotFactory(workspace=workspace)
    body = bot_of(client.get(f"{URL}/{bot.id}"))
    assert not {"url", "webhookUrl", "deployedAt"} & set(body)
    assert body["integrations"] == {}
    assert body["dev"] is False


def test_a_bot_of_another_workspace_is_not_found(client):
    theirs = BotFactory(workspace=WorkspaceFactory())
    for method in ("get", "put", "delete"):
        response = getattr(client, method)(f"{URL}/{theirs.id}", {}, format="json")
        assert_error(response, 404, "ResourceNotFound")
    assert Bot.objects.filter(pk=theirs.pk).exists()
    assert not bot_records().exists()


def test_a_bot_that_does_not_exist_is_not_found(client):
    assert_error(client.get(f"{URL}/{MISSING_BOT}"), 404, "ResourceNotFound")


@pytest.mark.parametrize(
    "bad_id", ["nope", "bot_123", "evt_01J0000000000000000000000X", "bot_" + "0" * 40]
)
@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_a_malformed_id_is_invalid_identifier(client, bad_id, method):
    response = getattr(client, method)(f"{URL}/{bad_id}", {"name": "x"}, format="json")
    assert_error(response, 400, "InvalidIdentifier")


# --- create -----------------------------------------------------------------------


def test_create_with_defaults(client, workspace):
    body = create(client, {})
    bot = Bot.objects.get()
    assert body["id"] == bot.id and bot.workspace_id == workspace.id
    assert body["name"] == bot.name == "New bot"
    assert body["tags"] == {} and body["dev"] is False and body["integrations"] == {}
    assert not {"url", "webhookUrl", "deployedAt"} & set(body)


@pytest.mark.parametrize("url_name", ["url", "webhookUrl"])
def test_create_with_every_field(client, url_name):
    body = create(
        client,
        {
            "name": "Sales",
            "tags": {"team": "sales"},
            "dev": True,
            url_name: "http://localhost:8080/hook",
        },
    )
    bot = Bot.objects.get(pk=body["id"])
    assert (bot.name, bot.tags, bot.dev, bot.webhook_url) == (
        "Sales",
        {"team": "sales"},
        True,
        "http://localhost:8080/hook",
    )
    assert body["url"] == body["webhookUrl"] == "http://localhost:8080/hook"
    assert bot_of(client.get(f"{URL}/{bot.id}")) == body


def test_a_create_is_recorded_with_the_tokens_account_and_address(client, workspace, membership):
    body = create(client, {"name": "Audited"})
    record = bot_records().get()
    assert record.action == AuditAction.BOT_CREATED
    assert record.workspace_id == workspace.id
    assert record.actor_id == membership.account.pk
    assert record.actor_label == membership.account.email
    assert record.client_ip == "127.0.0.1"
    assert (record.target_type, record.target_id) == ("bot", body["id"])
    assert record.changes["name"] == {"from": None, "to": "Audited"}


BAD_BODIES = [
    pytest.param({"nmae": "typo"}, id="unknown field"),
    pytest.param({"name": ""}, id="empty name"),
    pytest.param({"name": "x" * 201}, id="name too long"),
    pytest.param({"name": 5}, id="name a number"),
    pytest.param({"name": None}, id="name null"),
    pytest.param({"tags": ["a"]}, id="tags an array"),
    pytest.param({"tags": {"a": 1}}, id="tag value a number"),
    pytest.param({"tags": {"": "v"}}, id="empty tag name"),
    pytest.param({"dev": "true"}, id="dev a string"),
    pytest.param({"dev": 1}, id="dev a number"),
    pytest.param({"webhookUrl": "ftp://example.test/hook"}, id="ftp URL"),
    pytest.param({"webhookUrl": "not a url"}, id="not a URL"),
    pytest.param({"webhookUrl": "https://"}, id="URL without host"),
    pytest.param({"webhookUrl": "https://example.test/" + "a" * 2000}, id="URL too long"),
    pytest.param({"webhookUrl": 42}, id="URL a number"),
    pytest.param({"url": "ftp://example.test/hook"}, id="url: ftp URL"),
    pytest.param({"url": "not a url"}, id="url: not a URL"),
    pytest.param({"url": 42}, id="url: a number"),
    pytest.param({"url": "https://example.test/" + "a" * 2000}, id="url: too long"),
    pytest.param(
        {"url": "https://a.example.test", "webhookUrl": "https://a.example.test"},
        id="url and webhookUrl",
    ),
    pytest.param(
        {"url": None, "webhookUrl": "https://a.example.test"}, id="url null and webhookUrl"
    ),
    pytest.param({"description": "hosted field this service does not keep"}, id="description"),
    pytest.param([{"name": "x"}], id="array body"),
]


@pytest.mark.parametrize("body", BAD_BODIES)
def test_create_with_a_bad_body_is_invalid_payload(client, body):
    assert_error(client.post(URL, body, format="json"), 400, "InvalidPayload")
    assert not Bot.objects.exists()
    assert not bot_records().exists()


def test_create_with_malformed_json_is_invalid_payload(client):
    response = client.post(URL, "{not json", content_type="application/json")
    assert_error(response, 400, "InvalidPayload")


@pytest.mark.parametrize("url_name", ["url", "webhookUrl"])
def test_the_message_names_the_bad_field(client, url_name):
    body = assert_error(client.post(URL, {url_name: "nope"}, format="json"), 400, "InvalidPayload")
    assert url_name in body["message"]


def test_both_names_of_the_url_at_once_are_refused_by_name(client):
    body = assert_error(
        client.post(URL, {"url": "https://a.test", "webhookUrl": "https://b.test"}, format="json"),
        400,
        "InvalidPayload",
    )
    assert "url" in body["message"] and "webhookUrl" in body["message"]


# --- update -----------------------------------------------------------------------


def test_update_changes_only_the_named_fields(client, workspace, membership):
    bot = BotFactory(
        workspace=workspace, name="Old", tags={"a": "b"}, webhook_url="https://a.example.test"
    )
    body = bot_of(client.put(f"{URL}/{bot.id}", {"name": "New", "dev": True}, format="json"))
    assert body["name"] == "New" and body["dev"] is True
    assert body["tags"] == {"a": "b"} and body["webhookUrl"] == "https://a.example.test"
    bot.refresh_from_db()
    assert (bot.name, bot.dev, bot.tags) == ("New", True, {"a": "b"})
    record = bot_records().get()
    assert record.action == AuditAction.BOT_UPDATED
    assert record.actor_id == membership.account.pk and record.client_ip == "127.0.0.1"
    assert record.changes == {
        "name": {"from": "Old", "to": "New"},
        "dev": {"from": False, "to": True},
    }


@pytest.mark.parametrize("url_name", ["url", "webhookUrl"])
def test_update_sets_the_webhook_under_either_name(client, workspace, url_name):
    bot = BotFactory(workspace=workspace, webhook_url="https://a.example.test")
    body = bot_of(
        client.put(f"{URL}/{bot.id}", {url_name: "https://b.example.test"}, format="json")
    )
    assert body["url"] == body["webhookUrl"] == "https://b.example.test"
    bot.refresh_from_db()
    assert bot.webhook_url == "https://b.example.test"
    assert bot_records().get().changes == {
        "webhook_url": {"from": "https://a.example.test", "to": "https://b.example.test"}
    }


@pytest.mark.parametrize("url_name", ["url", "webhookUrl"])
@pytest.mark.parametrize("cleared", ["", None])
def test_update_clears_the_webhook(client, workspace, cleared, url_name):
    bot = BotFactory(workspace=workspace, webhook_url="https://a.example.test")
    body = bot_of(client.put(f"{URL}/{bot.id}", {url_name: cleared}, format="json"))
    assert not {"url", "webhookUrl"} & set(body)
    bot.refresh_from_db()
    assert bot.webhook_url == ""


def test_update_keeps_the_integrations_in_the_answer(client, workspace):
    bot = BotFactory(workspace=workspace)
    InstallationFactory(bot=bot, alias="crm")
    body = bot_of(client.put(f"{URL}/{bot.id}", {"tags": {"x": "y"}}, format="json"))
    assert set(body["integrations"]) == {"crm"}
    assert body["tags"] == {"x": "y"}


def test_an_update_that_changes_nothing_records_nothing(client, workspace):
    bot = BotFactory(workspace=workspace, name="Same")
    body = bot_of(client.put(f"{URL}/{bot.id}", {"name": "Same"}, format="json"))
    assert body["name"] == "Same"
    assert not bot_records().exists()


@pytest.mark.parametrize("body", BAD_BODIES)
def test_update_with_a_bad_body_is_invalid_payload(client, workspace, body):
    bot = BotFactory(workspace=workspace, name="Kept", webhook_url="https://a.example.test")
    assert_error(client.put(f"{URL}/{bot.id}", body, format="json"), 400, "InvalidPayload")
    bot.refresh_from_db()
    assert (bot.name, bot.webhook_url) == ("Kept", "https://a.example.test")
    assert not bot_records().exists()


# --- delete -----------------------------------------------------------------------


def test_delete_removes_the_bot_and_what_it_owns(client, workspace, membership):
    bot = BotFactory(workspace=workspace, name="Doomed")
    EventFactory(bot=bot)
    kept = BotFactory(workspace=workspace)
    response = client.delete(f"{URL}/{bot.id}")
    assert response.status_code == 200, response.content
    assert response.json() == {}
    assert list(Bot.objects.values_list("id", flat=True)) == [kept.id]
    assert not Event.objects.exists()
    record = bot_records().get()
    assert record.action == AuditAction.BOT_DELETED
    assert (record.target_id, record.changes) == (bot.id, {"name": "Doomed"})
    assert record.actor_id == membership.account.pk and record.client_ip == "127.0.0.1"
    assert_error(client.delete(f"{URL}/{bot.id}"), 404, "ResourceNotFound")
    assert_error(client.get(f"{URL}/{bot.id}"), 404, "ResourceNotFound")


def test_a_member_of_two_workspaces_reaches_only_the_named_ones_bot(workspace, membership):
    other = WorkspaceFactory()
    MembershipFactory(workspace=other, account=membership.account, role=Role.OWNER)
    theirs = BotFactory(workspace=other)
    raw = token_for(membership.account)
    assert_error(admin_api(raw, workspace.id).delete(f"{URL}/{theirs.id}"), 404, "ResourceNotFound")
    response = admin_api(raw, other.id).delete(f"{URL}/{theirs.id}")
    assert response.status_code == 200, response.content
    assert bot_records().get().workspace_id == other.id
