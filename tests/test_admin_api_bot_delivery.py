"""A bot's delivery settings through the admin API: its format
(`deliveryFormat`), how long a delivery waits for it (`maxExecutionTime`, as
the hosted API names it) and the configuration an SDK bot reads
(`configuration.data`)."""

from typing import Any

import pytest

from bots.models import AuditRecord, Bot, DeliveryFormat, User
from bots.services.bots import BOT_USER_CHAT_ID_PREFIX
from tests.conftest import assert_error

pytestmark = pytest.mark.django_db

URL = "/v1/admin/bots"


@pytest.fixture
def client(admin_client):
    return admin_client()


def bot_of(response: Any, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, response.content
    return response.json()["bot"]


def test_a_new_bot_is_delivered_in_standard_format_and_waits_the_workspace(client):
    body = bot_of(client.post(URL, {}, format="json"), 201)
    assert body["deliveryFormat"] == "standard"
    assert "maxExecutionTime" not in body
    assert body["configuration"] == {"data": {}, "schema": {}}
    assert not User.objects.exists()


def test_create_an_sdk_bot(client):
    body = bot_of(
        client.post(
            URL,
            {
                "name": "Assistant",
                "url": "http://127.0.0.1:8072/",
                "deliveryFormat": "botpress",
                "maxExecutionTime": 120,
                "configuration": {"data": {"model": "small", "temperature": 0.2}},
            },
            format="json",
        ),
        201,
    )
    bot = Bot.objects.get(pk=body["id"])
    assert (bot.delivery_format, bot.max_execution_time) == (DeliveryFormat.BOTPRESS, 120)
    assert bot.configuration == {"model": "small", "temperature": 0.2}
    assert body["deliveryFormat"] == "botpress"
    assert body["maxExecutionTime"] == 120
    assert body["configuration"] == {"data": bot.configuration, "schema": {}}
    # The user standing for it, named in every delivery (x-bot-user-id), exists already.
    assert User.objects.filter(bot=bot, chat_id=BOT_USER_CHAT_ID_PREFIX + bot.id).exists()


def test_update_switches_the_format_and_clears_the_execution_time(client):
    bot_id = bot_of(client.post(URL, {"maxExecutionTime": 30}, format="json"), 201)["id"]
    body = bot_of(
        client.put(
            f"{URL}/{bot_id}",
            {"deliveryFormat": "botpress", "maxExecutionTime": None},
            format="json",
        )
    )
    assert body["deliveryFormat"] == "botpress"
    assert "maxExecutionTime" not in body
    assert Bot.objects.get(pk=bot_id).max_execution_time is None


def test_the_audit_record_says_the_configuration_changed_not_what_it_holds(client):
    bot_id = bot_of(client.post(URL, {}, format="json"), 201)["id"]
    client.put(f"{URL}/{bot_id}", {"configuration": {"data": {"apiKey": "sk-123"}}}, format="json")
    record = AuditRecord.objects.filter(target_id=bot_id).order_by("-id").first()
    assert set(record.changes) == {"configuration"}
    assert "sk-123" not in str(record.changes)
    assert record.changes["configuration"]["to"].startswith("sha256:")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"deliveryFormat": "sdk"}, "deliveryFormat"),
        ({"deliveryFormat": None}, "deliveryFormat"),
        ({"maxExecutionTime": 0}, "maxExecutionTime"),
        ({"maxExecutionTime": 301}, "maxExecutionTime"),
        ({"maxExecutionTime": 1.5}, "maxExecutionTime"),
        ({"maxExecutionTime": "10"}, "maxExecutionTime"),
        ({"configuration": {"model": "small"}}, "configuration"),
        ({"configuration": {"data": [1]}}, "configuration"),
        ({"configuration": {"data": {}, "schema": {}}}, "configuration"),
        ({"configuration": None}, "configuration"),
        ({"configuration": {"data": {"k": "x" * 9000}}}, "configuration"),
    ],
)
def test_bad_delivery_settings_are_refused_and_nothing_is_written(client, body, field):
    bot_id = bot_of(client.post(URL, {}, format="json"), 201)["id"]
    before = Bot.objects.filter(pk=bot_id).values().get()
    error = assert_error(client.put(f"{URL}/{bot_id}", body, format="json"), 400, "InvalidPayload")
    assert field in error["message"]
    assert Bot.objects.filter(pk=bot_id).values().get() == before
    assert_error(client.post(URL, body, format="json"), 400, "InvalidPayload")
    assert Bot.objects.count() == 1
