"""`manage.py seed_demo --json`: a fresh demo workspace whose every credential works."""

import io
import json
from datetime import timedelta
from urllib.parse import quote

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from bots.models import AccessToken, Bot, Membership, Role, Workspace
from bots.token_checks import hash_token
from files.models import File
from tests.conftest import admin_api as admin
from tests.conftest import assert_error
from tests.conftest import runtime_api as runtime

pytestmark = pytest.mark.django_db

KEYS = {
    "baseUrl",
    "chatUrl",
    "workspaceId",
    "botId",
    "webhookSecret",
    "tokens",
    "outsiderToken",
    "otherBotId",
    "fileId",
    "fileKey",
    "webhookId",
    "userId",
    "userKey",
    "conversationId",
    "strangerUserKey",
}
ROLES = {"owner", "administrator", "manager", "developer", "viewer", "billing"}
BUILDERS = {"owner", "administrator", "manager", "developer"}


def seed() -> dict:
    out = io.StringIO()
    call_command("seed_demo", "--json", stdout=out)
    text = out.getvalue().strip()
    assert "\n" not in text
    demo = json.loads(text)
    assert isinstance(demo, dict)
    return demo


@pytest.fixture
def demo() -> dict:
    return seed()


def chat_post(demo: dict, key: str, text: str = "Hello"):
    return APIClient().post(
        f"/chat/{demo['webhookId']}/messages",
        {"payload": {"type": "text", "text": text}, "conversationId": demo["conversationId"]},
        format="json",
        HTTP_X_USER_KEY=key,
    )


def passages_url(demo: dict, ref: str) -> str:
    return f"/v1/files/{ref}/passages"


def test_prints_every_key(demo):
    assert KEYS <= set(demo)
    assert set(demo["tokens"]) == ROLES
    for key in KEYS - {"tokens"}:
        assert isinstance(demo[key], str) and demo[key], key
    assert demo["baseUrl"] == settings.PUBLIC_BASE_URL
    assert demo["chatUrl"] == settings.CHAT_URL
    assert demo["workspaceId"].startswith("wkspace_")
    assert demo["botId"].startswith("bot_")
    assert demo["otherBotId"].startswith("bot_")
    assert demo["otherBotId"] != demo["botId"]
    assert demo["fileId"].startswith("file_")
    assert all(token.startswith("bp_pat_") for token in demo["tokens"].values())
    assert demo["outsiderToken"].startswith("bp_pat_")
    assert len(set(demo["tokens"].values()) | {demo["outsiderToken"]}) == 7
    assert demo["userKey"] != demo["strangerUserKey"]


def test_objects_exist_as_printed(demo):
    bot = Bot.objects.get(id=demo["botId"])
    assert bot.workspace_id == demo["workspaceId"]
    assert Bot.objects.get(id=demo["otherBotId"]).workspace_id != demo["workspaceId"]
    file = File.objects.get(id=demo["fileId"])
    assert file.bot_id == demo["botId"]
    assert file.key == demo["fileKey"]
    assert bot.chat_connections.filter(webhook_id=demo["webhookId"]).exists()
    assert bot.users.filter(chat_id=demo["userId"]).exists()
    assert bot.conversations.filter(chat_id=demo["conversationId"]).exists()


def test_two_calls_make_two_separate_workspaces():
    first, second = seed(), seed()
    assert first["workspaceId"] != second["workspaceId"]
    assert first["botId"] != second["botId"]
    assert first["fileId"] != second["fileId"]
    assert first["webhookId"] != second["webhookId"]
    assert set(first["tokens"].values()).isdisjoint(second["tokens"].values())
    assert (
        Workspace.objects.filter(id__in=[first["workspaceId"], second["workspaceId"]]).count() == 2
    )
    # A token of one demo does not reach the other.
    response = runtime(first["tokens"]["owner"], second["botId"]).get(
        passages_url(second, second["fileId"])
    )
    assert response.status_code == 401
    # Both still work.
    for demo in (first, second):
        response = runtime(demo["tokens"]["viewer"], demo["botId"]).get(
            passages_url(demo, demo["fileId"])
        )
        assert response.status_code == 200


@pytest.mark.parametrize("role", sorted(ROLES))
def test_each_token_has_its_role(demo, role):
    token = AccessToken.objects.get(token_hash=hash_token(demo["tokens"][role]))
    membership = Membership.objects.get(
        workspace_id=demo["workspaceId"], account_id=token.account_id
    )
    assert membership.role == role


@pytest.mark.parametrize("role", sorted(ROLES))
def test_each_token_works_for_its_role(demo, role):
    token = demo["tokens"][role]

    response = runtime(token, demo["botId"]).post(
        "/v1/chat/events", {"type": "demo", "payload": {"role": role}}, format="json"
    )
    assert response.status_code == (201 if role in BUILDERS else 403), response.content

    response = runtime(token, demo["botId"]).get(passages_url(demo, demo["fileId"]))
    assert response.status_code == (403 if role == Role.BILLING else 200), response.content

    response = admin(token, demo["workspaceId"]).get("/v1/admin/bots")
    assert response.status_code == (403 if role == Role.BILLING else 200), response.content
    if role != Role.BILLING:
        assert [b["id"] for b in response.json()["bots"]] == [demo["botId"]]


def test_owner_posts_an_event(demo):
    response = runtime(demo["tokens"]["owner"], demo["botId"]).post(
        "/v1/chat/events", {"type": "demo", "payload": {}}, format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["event"]["type"] == "demo"


def test_viewer_may_not_post_an_event(demo):
    response = runtime(demo["tokens"]["viewer"], demo["botId"]).post(
        "/v1/chat/events", {"type": "demo", "payload": {}}, format="json"
    )
    assert_error(response, 403, "Forbidden")


def test_billing_may_not_read_passages(demo):
    response = runtime(demo["tokens"]["billing"], demo["botId"]).get(
        passages_url(demo, demo["fileId"])
    )
    assert_error(response, 403, "Forbidden")


def test_outsider_token_does_not_reach_the_demo_bot(demo):
    response = runtime(demo["outsiderToken"], demo["botId"]).get(passages_url(demo, demo["fileId"]))
    assert_error(response, 401, "Unauthorized")
    response = runtime(demo["outsiderToken"], demo["botId"]).post(
        "/v1/chat/events", {"type": "demo", "payload": {}}, format="json"
    )
    assert response.status_code == 401
    response = admin(demo["outsiderToken"], demo["workspaceId"]).get("/v1/admin/bots")
    assert response.status_code == 401


def test_outsider_token_reaches_the_other_bot(demo):
    response = runtime(demo["outsiderToken"], demo["otherBotId"]).post(
        "/v1/chat/events", {"type": "demo", "payload": {}}, format="json"
    )
    assert response.status_code == 201, response.content
    response = runtime(demo["tokens"]["owner"], demo["otherBotId"]).post(
        "/v1/chat/events", {"type": "demo", "payload": {}}, format="json"
    )
    assert response.status_code == 401


def read_all(client: APIClient, url: str) -> list[dict]:
    passages, token = [], None
    while True:
        params = {"limit": 200, **({"nextToken": token} if token else {})}
        response = client.get(url, params)
        assert response.status_code == 200, response.content
        body = response.json()
        passages += body["passages"]
        token = body["meta"].get("nextToken")
        if not token:
            return passages


def test_passages_of_the_file(demo):
    client = runtime(demo["tokens"]["developer"], demo["botId"])
    by_id = read_all(client, passages_url(demo, demo["fileId"]))
    assert len(by_id) >= 45
    positions = [p["meta"]["position"] for p in by_id]
    assert positions == sorted(positions)
    assert len({p["id"] for p in by_id}) == len(by_id)
    assert all(p["content"] for p in by_id)
    # More than one default page, so that paging can be tried on the demo.
    first = client.get(passages_url(demo, demo["fileId"])).json()
    assert len(first["passages"]) == 20
    assert "nextToken" in first["meta"]

    by_key = read_all(client, passages_url(demo, quote(demo["fileKey"], safe="")))
    assert by_key == by_id
    if "/" in demo["fileKey"]:
        assert read_all(client, passages_url(demo, demo["fileKey"])) == by_id


def test_user_key_posts_a_message(demo):
    response = chat_post(demo, demo["userKey"])
    assert response.status_code == 201, response.content
    message = response.json()["message"]
    assert message["userId"] == demo["userId"]
    assert message["conversationId"] == demo["conversationId"]
    assert message["payload"] == {"type": "text", "text": "Hello"}


def test_stranger_user_key_is_forbidden(demo):
    response = chat_post(demo, demo["strangerUserKey"])
    assert_error(response, 403, "Forbidden")


def test_chat_hello(demo):
    assert APIClient().get(f"/chat/{demo['webhookId']}/hello").status_code == 200


def test_the_webhook_secret_is_the_bots():
    demo = seed()
    assert Bot.objects.get(id=demo["botId"]).signing_secret == demo["webhookSecret"]
    assert demo["webhookSecret"].startswith("whsec_")


def test_webhook_url_points_the_demo_bot_at_a_receiver():
    out = io.StringIO()
    call_command("seed_demo", "--json", "--webhook-url", "http://127.0.0.1:8100/", stdout=out)
    demo = json.loads(out.getvalue())
    assert Bot.objects.get(id=demo["botId"]).webhook_url == "http://127.0.0.1:8100/"
    assert Bot.objects.get(id=seed()["botId"]).webhook_url == ""


def test_delivery_format_makes_the_demo_bot_an_sdk_bot():
    out = io.StringIO()
    call_command("seed_demo", "--json", "--delivery-format", "botpress", stdout=out)
    demo = json.loads(out.getvalue())
    assert demo["deliveryFormat"] == "botpress"
    assert Bot.objects.get(id=demo["botId"]).delivery_format == "botpress"
    assert seed()["deliveryFormat"] == "standard"


def test_a_bad_webhook_url_is_refused_and_nothing_is_made():
    bots = Bot.objects.count()
    with pytest.raises(CommandError, match="--webhook-url"):
        call_command(
            "seed_demo", "--json", "--webhook-url", "ftp://example.test/", stdout=io.StringIO()
        )
    assert Bot.objects.count() == bots


def test_the_staff_login_is_an_administrator_but_no_superuser(demo):
    accounts = get_user_model().objects
    staff = accounts.get(username=demo["staff"]["username"])
    assert staff.is_staff and not staff.is_superuser
    assert staff.check_password(demo["staff"]["password"])
    assert staff.memberships.get().role == Role.ADMINISTRATOR
    assert accounts.get(username=demo["admin"]["username"]).is_superuser


# --- --save: make run keeps its demo ------------------------------------------


def save(path, *args: str) -> dict:
    call_command(
        "seed_demo", "--save", str(path), *args, stdout=io.StringIO(), stderr=io.StringIO()
    )
    return json.loads(path.read_text())


def test_save_seeds_once_then_reuses_what_it_saved(tmp_path):
    path = tmp_path / "demo.json"
    first = save(path, "--webhook-url", "http://127.0.0.1:8100/")
    workspaces = Workspace.objects.count()
    again = save(path, "--webhook-url", "http://127.0.0.1:8100/")
    assert again == first
    assert Workspace.objects.count() == workspaces
    response = runtime(again["tokens"]["owner"], again["botId"]).post(
        "/v1/chat/events", {"type": "ping", "payload": {}}, format="json"
    )
    assert response.status_code == 201


def test_a_reused_demo_bot_is_pointed_at_the_webhook_url_of_this_run(tmp_path):
    path = tmp_path / "demo.json"
    first = save(path, "--webhook-url", "http://127.0.0.1:8100/")
    again = save(path, "--webhook-url", "http://127.0.0.1:8200/")
    assert (again["botId"], again["webhookUrl"]) == (first["botId"], "http://127.0.0.1:8200/")
    assert Bot.objects.get(id=first["botId"]).webhook_url == "http://127.0.0.1:8200/"


def test_fresh_seeds_a_new_demo_over_the_saved_one(tmp_path):
    path = tmp_path / "demo.json"
    first = save(path)
    assert save(path, "--fresh")["workspaceId"] != first["workspaceId"]


@pytest.mark.parametrize("damage", ["workspace", "token", "expired", "file"])
def test_a_saved_demo_that_is_no_longer_whole_is_seeded_anew(tmp_path, damage):
    path = tmp_path / "demo.json"
    first = save(path)
    if damage == "workspace":
        Workspace.objects.filter(id=first["workspaceId"]).delete()
    elif damage == "token":
        AccessToken.objects.filter(token_hash=hash_token(first["tokens"]["owner"])).delete()
    elif damage == "expired":
        AccessToken.objects.filter(token_hash=hash_token(first["tokens"]["owner"])).update(
            expires_at=timezone.now() - timedelta(minutes=1)
        )
    else:
        path.write_text("{not json")
    again = save(path)
    assert again["workspaceId"] != first["workspaceId"]
    assert json.loads(path.read_text()) == again


def test_a_bad_webhook_url_for_a_reused_demo_is_refused(tmp_path):
    path = tmp_path / "demo.json"
    first = save(path)
    with pytest.raises(CommandError, match="--webhook-url"):
        save(path, "--webhook-url", "ftp://example.com/")
    assert json.loads(path.read_text()) == first
