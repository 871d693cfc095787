"""Bearer tokens with x-bot-id (runtime) and x-workspace-id (admin), and the tokens themselves."""

import hashlib
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from bots.models import AccessToken, Role
from bots.services.tokens import access_token_create, access_token_revoke
from events.models import Event
from platform_site.foundation.ids import new_id
from tests.conftest import assert_error
from tests.factories import (
    AccountFactory,
    BotFactory,
    MembershipFactory,
    WorkspaceFactory,
    token_for,
)

pytestmark = pytest.mark.django_db

EVENTS = "/v1/chat/events"
ADMIN_BOTS = "/v1/admin/bots"
EVENT_BODY = {"type": "t", "payload": {}}


def member(workspace: Any, role: str = Role.DEVELOPER) -> Any:
    return MembershipFactory(workspace=workspace, role=role).account


def runtime_post(headers: dict[str, str]) -> Any:
    return APIClient().post(EVENTS, EVENT_BODY, format="json", headers=headers)


def admin_get(headers: dict[str, str]) -> Any:
    return APIClient().get(ADMIN_BOTS, headers=headers)


def assert_unauthorized(response: Any) -> dict[str, Any]:
    body = assert_error(response, 401, "Unauthorized")
    assert response["WWW-Authenticate"] == "Bearer"
    return body


def assert_runtime_refused(headers: dict[str, str]) -> dict[str, Any]:
    before = Event.objects.count()
    body = assert_unauthorized(runtime_post(headers))
    assert Event.objects.count() == before
    return body


# --- runtime scheme -------------------------------------------------------------------


def test_runtime_valid_credentials_are_accepted(bot):
    raw = token_for(member(bot.workspace))
    response = runtime_post({"Authorization": f"Bearer {raw}", "x-bot-id": bot.id})
    assert response.status_code == 201, response.content
    assert Event.objects.get().bot_id == bot.id


def test_runtime_bearer_scheme_is_case_insensitive(bot):
    raw = token_for(member(bot.workspace))
    response = runtime_post({"Authorization": f"bearer {raw}", "x-bot-id": bot.id})
    assert response.status_code == 201, response.content


def test_runtime_without_authorization_is_401_with_www_authenticate(bot):
    assert_runtime_refused({"x-bot-id": bot.id})


def test_runtime_without_any_header_is_401(api_client):
    response = api_client.post(EVENTS, EVENT_BODY, format="json")
    assert_unauthorized(response)


@pytest.mark.parametrize(
    "authorization",
    [
        "Basic x",
        "Basic dXNlcjpwYXNz",
        "Bearer",
        "Bearer ",
        "Token bp_pat_" + "a" * 43,
        "",
    ],
)
def test_runtime_authorization_that_is_not_bearer_is_401(bot, authorization):
    assert_runtime_refused({"Authorization": authorization, "x-bot-id": bot.id})


@pytest.mark.parametrize(
    "raw",
    [
        "x",
        "bp_pat_",
        "bp_pat_short",
        "bp_pat_" + "a" * 44,
        "xx_pat_" + "a" * 43,
        "a" * 50,
        "bp_pat_" + "a" * 10_000,
    ],
)
def test_runtime_malformed_token_is_401(bot, raw):
    member(bot.workspace)
    assert_runtime_refused({"Authorization": f"Bearer {raw}", "x-bot-id": bot.id})


def test_runtime_unknown_well_formed_token_is_401(bot):
    real = token_for(member(bot.workspace))
    unknown = real[:-1] + ("A" if real[-1] != "A" else "B")
    assert len(unknown) == len(real)
    assert_runtime_refused({"Authorization": f"Bearer {unknown}", "x-bot-id": bot.id})


def test_runtime_revoked_token_is_401(bot):
    token, raw = access_token_create(account=member(bot.workspace))
    headers = {"Authorization": f"Bearer {raw}", "x-bot-id": bot.id}
    assert runtime_post(headers).status_code == 201
    access_token_revoke(token=token)
    assert_runtime_refused(headers)


def test_revoking_twice_keeps_the_first_revocation_time(bot):
    token, _ = access_token_create(account=member(bot.workspace))
    access_token_revoke(token=token)
    first = AccessToken.objects.get(pk=token.pk).revoked_at
    assert first is not None
    access_token_revoke(token=AccessToken.objects.get(pk=token.pk))
    assert AccessToken.objects.get(pk=token.pk).revoked_at == first


def later(monkeypatch: pytest.MonkeyPatch, moment: Any) -> None:
    """Time has come to `moment` (what a process remembers of a token is
    checked against the time again: it expires there too)."""
    monkeypatch.setattr(timezone, "now", lambda: moment)


def test_runtime_expired_token_is_401(bot, monkeypatch):
    token, raw = access_token_create(account=member(bot.workspace), expires_in_days=1)
    headers = {"Authorization": f"Bearer {raw}", "x-bot-id": bot.id}
    assert runtime_post(headers).status_code == 201  # not yet expired
    assert token.expires_at is not None
    later(monkeypatch, token.expires_at + timedelta(seconds=1))
    body = assert_runtime_refused(headers)
    assert body["message"] == "The token has expired"


def test_token_expiring_in_days_gets_that_expiry(bot):
    before = timezone.now()
    token, _ = access_token_create(account=member(bot.workspace), expires_in_days=7)
    assert token.expires_at is not None
    assert before + timedelta(days=7) <= token.expires_at <= timezone.now() + timedelta(days=7)


def test_runtime_token_of_an_inactive_account_is_401(bot):
    account = member(bot.workspace)
    raw = token_for(account)
    headers = {"Authorization": f"Bearer {raw}", "x-bot-id": bot.id}
    assert runtime_post(headers).status_code == 201
    account.is_active = False
    account.save()
    assert_runtime_refused(headers)


def test_runtime_missing_x_bot_id_is_401(bot):
    raw = token_for(member(bot.workspace))
    assert_runtime_refused({"Authorization": f"Bearer {raw}"})


def test_runtime_empty_x_bot_id_is_401(bot):
    raw = token_for(member(bot.workspace))
    assert_runtime_refused({"Authorization": f"Bearer {raw}", "x-bot-id": ""})


@pytest.mark.parametrize(
    "bot_id",
    [
        "garbage",
        "bot_",
        "bot_" + "!" * 26,
        "bot_01j00000000000000000000000",  # lower case: not a ULID
        "wkspace_01J0000000000000000000000",
        "' OR 1=1 --",
        "bot_" + "0" * 300,
    ],
)
def test_runtime_garbage_x_bot_id_is_401(bot, bot_id):
    raw = token_for(member(bot.workspace))
    assert_runtime_refused({"Authorization": f"Bearer {raw}", "x-bot-id": bot_id})


def test_runtime_bot_of_a_workspace_the_account_is_not_in_is_401_like_a_nonexistent_bot(bot):
    raw = token_for(member(bot.workspace))
    stranger_bot = BotFactory(workspace=WorkspaceFactory())
    missing_id = new_id("bot")

    stranger = assert_runtime_refused(
        {"Authorization": f"Bearer {raw}", "x-bot-id": stranger_bot.id}
    )
    missing = assert_runtime_refused({"Authorization": f"Bearer {raw}", "x-bot-id": missing_id})
    # Same answer, except for the id echoed back: nothing says which one exists.
    assert stranger["message"].replace(stranger_bot.id, "<id>") == missing["message"].replace(
        missing_id, "<id>"
    )


def test_runtime_token_of_an_account_without_any_membership_is_401(bot):
    raw = token_for(AccountFactory())
    assert_runtime_refused({"Authorization": f"Bearer {raw}", "x-bot-id": bot.id})


def test_runtime_passages_endpoint_uses_the_same_scheme(bot):
    raw = token_for(member(bot.workspace))
    response = APIClient().get("/v1/files/docs/a.txt/passages", headers={"x-bot-id": bot.id})
    assert_unauthorized(response)
    response = APIClient().get(
        "/v1/files/docs/a.txt/passages",
        headers={"Authorization": f"Bearer {raw}", "x-bot-id": new_id("bot")},
    )
    assert_unauthorized(response)


# --- admin scheme -----------------------------------------------------------------------


def test_admin_valid_credentials_are_accepted(workspace, bot):
    raw = token_for(member(workspace))
    response = admin_get({"Authorization": f"Bearer {raw}", "x-workspace-id": workspace.id})
    assert response.status_code == 200, response.content
    assert [b["id"] for b in response.json()["bots"]] == [bot.id]


def test_admin_without_authorization_is_401(workspace):
    assert_unauthorized(admin_get({"x-workspace-id": workspace.id}))


@pytest.mark.parametrize("authorization", ["Basic x", "Bearer", "Token abc"])
def test_admin_authorization_that_is_not_bearer_is_401(workspace, authorization):
    member(workspace)
    assert_unauthorized(admin_get({"Authorization": authorization, "x-workspace-id": workspace.id}))


@pytest.mark.parametrize("raw", ["x", "bp_pat_short", "bp_pat_" + "a" * 44, "a" * 50])
def test_admin_malformed_token_is_401(workspace, raw):
    assert_unauthorized(
        admin_get({"Authorization": f"Bearer {raw}", "x-workspace-id": workspace.id})
    )


def test_admin_unknown_token_is_401(workspace):
    real = token_for(member(workspace))
    unknown = real[:-1] + ("A" if real[-1] != "A" else "B")
    assert_unauthorized(
        admin_get({"Authorization": f"Bearer {unknown}", "x-workspace-id": workspace.id})
    )


def test_admin_revoked_token_is_401(workspace):
    token, raw = access_token_create(account=member(workspace))
    headers = {"Authorization": f"Bearer {raw}", "x-workspace-id": workspace.id}
    assert admin_get(headers).status_code == 200
    access_token_revoke(token=token)
    assert_unauthorized(admin_get(headers))


def test_admin_expired_token_is_401(workspace, monkeypatch):
    token, raw = access_token_create(account=member(workspace), expires_in_days=30)
    headers = {"Authorization": f"Bearer {raw}", "x-workspace-id": workspace.id}
    assert admin_get(headers).status_code == 200
    assert token.expires_at is not None
    later(monkeypatch, token.expires_at + timedelta(days=1))
    assert assert_unauthorized(admin_get(headers))["message"] == "The token has expired"


def test_admin_token_of_an_inactive_account_is_401(workspace):
    account = member(workspace)
    raw = token_for(account)
    account.is_active = False
    account.save()
    assert_unauthorized(
        admin_get({"Authorization": f"Bearer {raw}", "x-workspace-id": workspace.id})
    )


def test_admin_missing_x_workspace_id_is_401(workspace):
    raw = token_for(member(workspace))
    assert_unauthorized(admin_get({"Authorization": f"Bearer {raw}"}))


@pytest.mark.parametrize(
    "workspace_id", ["garbage", "wkspace_", "bot_01J00000000000000000000000", "wkspace_" + "x" * 26]
)
def test_admin_garbage_x_workspace_id_is_401(workspace, workspace_id):
    raw = token_for(member(workspace))
    assert_unauthorized(
        admin_get({"Authorization": f"Bearer {raw}", "x-workspace-id": workspace_id})
    )


def test_admin_workspace_the_account_is_not_in_is_401_like_a_nonexistent_one(workspace):
    raw = token_for(member(workspace))
    other = WorkspaceFactory()
    BotFactory(workspace=other)
    missing_id = new_id("wkspace")

    stranger = assert_unauthorized(
        admin_get({"Authorization": f"Bearer {raw}", "x-workspace-id": other.id})
    )
    missing = assert_unauthorized(
        admin_get({"Authorization": f"Bearer {raw}", "x-workspace-id": missing_id})
    )
    assert stranger["message"].replace(other.id, "<id>") == missing["message"].replace(
        missing_id, "<id>"
    )


def test_runtime_header_does_not_open_the_admin_api(bot):
    raw = token_for(member(bot.workspace))
    assert_unauthorized(admin_get({"Authorization": f"Bearer {raw}", "x-bot-id": bot.id}))


# --- token storage ------------------------------------------------------------------------


def test_token_is_stored_only_as_its_sha256(workspace):
    account = member(workspace)
    token, raw = access_token_create(account=account, name="ci")
    assert raw.startswith("bp_pat_")
    assert len(raw) == 50

    row = AccessToken.objects.get(pk=token.pk)
    assert row.token_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert row.prefix == raw[:12]
    assert row.name == "ci"
    assert row.account == account
    for field in AccessToken._meta.concrete_fields:
        value = field.value_from_object(row)
        if isinstance(value, str):
            assert raw not in value, field.name
            assert raw[12:] not in value, field.name


def test_tokens_are_random_and_distinct(workspace):
    account = member(workspace)
    raws = {access_token_create(account=account)[1] for _ in range(5)}
    assert len(raws) == 5
    assert AccessToken.objects.filter(account=account).count() == 5


def test_last_used_at_is_set_on_first_use(bot):
    token, raw = access_token_create(account=member(bot.workspace))
    assert AccessToken.objects.get(pk=token.pk).last_used_at is None
    before = timezone.now()
    assert runtime_post({"Authorization": f"Bearer {raw}", "x-bot-id": bot.id}).status_code == 201
    used = AccessToken.objects.get(pk=token.pk).last_used_at
    assert used is not None
    assert before <= used <= timezone.now()


def test_last_used_at_is_not_set_by_a_revoked_token(bot):
    token, raw = access_token_create(account=member(bot.workspace))
    access_token_revoke(token=token)
    assert_runtime_refused({"Authorization": f"Bearer {raw}", "x-bot-id": bot.id})
    assert AccessToken.objects.get(pk=token.pk).last_used_at is None


def test_last_used_at_is_not_rewritten_within_a_minute(bot):
    token, raw = access_token_create(account=member(bot.workspace))
    recent = timezone.now() - timedelta(seconds=30)
    AccessToken.objects.filter(pk=token.pk).update(last_used_at=recent)
    headers = {"Authorization": f"Bearer {raw}", "x-bot-id": bot.id}
    assert runtime_post(headers).status_code == 201
    assert runtime_post(headers).status_code == 201
    assert AccessToken.objects.get(pk=token.pk).last_used_at == recent


def test_last_used_at_is_rewritten_after_a_minute(bot):
    token, raw = access_token_create(account=member(bot.workspace))
    old = timezone.now() - timedelta(minutes=2)
    AccessToken.objects.filter(pk=token.pk).update(last_used_at=old)
    before = timezone.now()
    assert runtime_post({"Authorization": f"Bearer {raw}", "x-bot-id": bot.id}).status_code == 201
    used = AccessToken.objects.get(pk=token.pk).last_used_at
    assert used is not None
    assert before <= used <= timezone.now()


def test_last_used_at_is_recorded_by_the_admin_scheme_too(workspace):
    token, raw = access_token_create(account=member(workspace))
    old = timezone.now() - timedelta(minutes=5)
    AccessToken.objects.filter(pk=token.pk).update(last_used_at=old)
    headers = {"Authorization": f"Bearer {raw}", "x-workspace-id": workspace.id}
    assert admin_get(headers).status_code == 200
    first = AccessToken.objects.get(pk=token.pk).last_used_at
    assert first is not None and first > old
    assert admin_get(headers).status_code == 200
    assert AccessToken.objects.get(pk=token.pk).last_used_at == first


# --- create_token command ---------------------------------------------------------------


def run_create_token(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("create_token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_create_token_prints_a_working_token(bot):
    account = member(bot.workspace)
    out, err = run_create_token("--email", account.email)
    raw = out.strip()
    assert raw.startswith("bp_pat_")
    assert len(raw) == 50
    assert raw not in err
    token = AccessToken.objects.get(account=account)
    assert token.expires_at is None
    assert token.prefix == raw[:12]
    response = runtime_post({"Authorization": f"Bearer {raw}", "x-bot-id": bot.id})
    assert response.status_code == 201, response.content


def test_create_token_matches_the_email_case_insensitively(bot):
    account = member(bot.workspace)
    out, _ = run_create_token("--email", account.email.upper())
    assert (
        AccessToken.objects.get(account=account).token_hash
        == hashlib.sha256(out.strip().encode()).hexdigest()
    )


def test_create_token_with_expiry(bot):
    account = member(bot.workspace)
    before = timezone.now()
    out, _ = run_create_token("--email", account.email, "--expires-in-days", "3", "--name", "ci")
    token = AccessToken.objects.get(account=account)
    assert token.name == "ci"
    assert token.expires_at is not None
    assert before + timedelta(days=3) <= token.expires_at <= timezone.now() + timedelta(days=3)
    response = runtime_post({"Authorization": f"Bearer {out.strip()}", "x-bot-id": bot.id})
    assert response.status_code == 201, response.content


def test_create_token_for_an_unknown_email_fails():
    AccountFactory(email="someone@example.test", username="someone@example.test")
    with pytest.raises(CommandError):
        run_create_token("--email", "nobody@example.test")
    assert AccessToken.objects.count() == 0


@pytest.mark.parametrize("days", ["0", "-1"])
def test_create_token_with_non_positive_expiry_fails(workspace, days):
    account = member(workspace)
    with pytest.raises(CommandError):
        run_create_token("--email", account.email, "--expires-in-days", days)
    assert AccessToken.objects.filter(account=account).count() == 0
