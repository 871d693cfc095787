"""What each process remembers of credentials (platform_site/foundation/credential_cache.py): a
kept answer costs no query, every write that changes one makes the next
request read again, and without an invalidation subscriber nothing is
trusted for more than a second."""

import logging
import os
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection as db_connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from bots.models import AccessToken, Bot, Membership, Role, User
from bots.services.bots import bot_delete
from bots.services.members import member_add, member_remove, member_role_change
from bots.services.tokens import access_token_create, access_token_revoke
from bots.token_checks import InvalidToken
from chat.credentials import chat_connection_for_webhook, chat_user_for_key
from chat.models import ChatConnection
from chat.services.users import user_delete
from platform_site.api.credentials import bot_grants, credentials_for_bot, credentials_for_workspace
from platform_site.foundation import credential_cache, credential_invalidation
from platform_site.foundation.credential_cache import CredentialCache
from platform_site.foundation.credential_invalidation import credentials_changed
from tests.conftest import assert_error, runtime_api
from tests.factories import (
    AccountFactory,
    BotFactory,
    ChatConnectionFactory,
    MembershipFactory,
    UserFactory,
    user_key,
)

pytestmark = pytest.mark.django_db

EVENTS = "/v1/chat/events"
ADMIN_BOTS = "/v1/admin/bots"


class Clock:
    """Stands for time.monotonic in the cache, so that tests age entries without sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(credential_cache, "clock", fake)
    return fake


@pytest.fixture
def no_redis(settings: Any) -> None:
    """The embedded defaults: no subscriber, so the 1 s rule only."""
    settings.LIVE_STREAM_REDIS_URL = ""


@pytest.fixture
def listening(monkeypatch: pytest.MonkeyPatch, clock: Clock) -> dict[str, float | None]:
    """A subscriber that has (or has not) been listening since `since`."""
    state: dict[str, float | None] = {"since": clock.now - 5}
    monkeypatch.setattr(credential_invalidation, "listening_since", lambda: state["since"])
    return state


@pytest.fixture
def grant(bot: Bot) -> dict[str, Any]:
    membership = MembershipFactory(workspace=bot.workspace, role=Role.DEVELOPER)
    token, raw = access_token_create(account=membership.account)
    return {"membership": membership, "token": token, "raw": raw, "bot": bot}


def bot_role(grant: dict[str, Any]) -> str | None:
    principal = credentials_for_bot(raw=grant["raw"], bot_id=grant["bot"].id)
    return None if principal is None else principal.role


def refusal(grant: dict[str, Any]) -> str | None:
    """Why the token is refused at the bot, None when it is let in."""
    try:
        principal = credentials_for_bot(raw=grant["raw"], bot_id=grant["bot"].id)
    except InvalidToken as exc:
        return str(exc)
    return None if principal is not None else "not a member"


def silently_revoke(token: AccessToken) -> None:
    """A write no invalidation announces, to see whether an answer is read again."""
    AccessToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())


# --- kept answers cost no query ----------------------------------------------------


def test_a_bot_token_is_read_once(grant, django_assert_num_queries):
    with django_assert_num_queries(2):  # the lookup, and the token's first use recorded
        assert bot_role(grant) == Role.DEVELOPER
    with django_assert_num_queries(0):
        principal = credentials_for_bot(raw=grant["raw"], bot_id=grant["bot"].id)
    assert principal is not None
    bot = grant["bot"]
    assert (principal.bot.id, principal.bot.workspace_id) == (bot.id, bot.workspace_id)
    assert principal.workspace.id == bot.workspace_id
    assert principal.token.pk == grant["token"].pk
    assert principal.token.account.pk == grant["membership"].account_id


def test_each_request_gets_instances_of_its_own(grant):
    first = credentials_for_bot(raw=grant["raw"], bot_id=grant["bot"].id)
    second = credentials_for_bot(raw=grant["raw"], bot_id=grant["bot"].id)
    assert first is not None and second is not None
    assert first.token is not second.token
    assert first.bot is not second.bot
    assert first.workspace is not second.workspace


def test_a_workspace_token_is_read_once(grant, django_assert_num_queries):
    workspace_id = grant["bot"].workspace_id
    assert credentials_for_workspace(raw=grant["raw"], workspace_id=workspace_id) is not None
    with django_assert_num_queries(0):
        principal = credentials_for_workspace(raw=grant["raw"], workspace_id=workspace_id)
    assert principal is not None
    assert (principal.role, principal.workspace.id) == (Role.DEVELOPER, workspace_id)


def test_a_token_is_kept_per_scope(grant, django_assert_num_queries):
    other = BotFactory(workspace=grant["bot"].workspace)
    bot_role(grant)
    with django_assert_num_queries(1):  # another bot: another lookup
        assert credentials_for_bot(raw=grant["raw"], bot_id=other.id) is not None


def test_the_tokens_use_is_recorded_once_a_minute_from_the_kept_answer(
    grant, clock, django_assert_num_queries, monkeypatch
):
    bot_role(grant)
    now = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: now + timedelta(minutes=2))
    with django_assert_num_queries(1):  # the use is recorded: a minute has passed
        bot_role(grant)
    with django_assert_num_queries(0):  # and the kept answer knows it
        bot_role(grant)
    assert AccessToken.objects.get(pk=grant["token"].pk).last_used_at == now + timedelta(minutes=2)


def test_a_runtime_request_with_kept_credentials_does_not_read_the_token(grant):
    client = runtime_api(grant["raw"], grant["bot"].id)
    assert client.post(EVENTS, {"type": "t", "payload": {}}, format="json").status_code == 201
    with CaptureQueriesContext(db_connection) as queries:
        assert client.post(EVENTS, {"type": "t", "payload": {}}, format="json").status_code == 201
    token_table = AccessToken._meta.db_table
    assert not [q["sql"] for q in queries.captured_queries if token_table in q["sql"]]


def test_a_chat_connection_and_user_are_read_once(bot, django_assert_num_queries):
    chat = ChatConnectionFactory(bot=bot)
    user = UserFactory(bot=bot)
    found = chat_connection_for_webhook(chat.webhook_id)
    assert found is not None
    with django_assert_num_queries(0):
        again = chat_connection_for_webhook(chat.webhook_id)
    assert again is not None and again is not found
    assert [getattr(again, f.attname) for f in ChatConnection._meta.concrete_fields] == [
        getattr(chat, f.attname) for f in ChatConnection._meta.concrete_fields
    ]
    assert chat_user_for_key(connection=again, chat_user_id=user.chat_id) is not None
    with django_assert_num_queries(0):
        kept = chat_user_for_key(connection=again, chat_user_id=user.chat_id)
    assert kept is not None and (kept.pk, kept.bot_id, kept.chat_id) == (
        user.pk,
        user.bot_id,
        user.chat_id,
    )


def test_a_chat_request_with_kept_credentials_reads_neither(bot):
    chat = ChatConnectionFactory(bot=bot)
    user = UserFactory(bot=bot, name="Alice")
    client = APIClient(HTTP_X_USER_KEY=user_key(chat, user))
    url = f"/chat/{chat.webhook_id}/conversations"
    assert client.get(url).status_code == 200
    with CaptureQueriesContext(db_connection) as queries:
        assert client.get(url).status_code == 200
    read = " ".join(q["sql"] for q in queries.captured_queries)
    assert ChatConnection._meta.db_table not in read
    # The profile is still read where it is shown, and is never stale.
    me = client.get(f"/chat/{chat.webhook_id}/users/me")
    assert me.json()["user"]["name"] == "Alice"
    User.objects.filter(pk=user.pk).update(name="Alicia")
    assert client.get(f"/chat/{chat.webhook_id}/users/me").json()["user"]["name"] == "Alicia"
    put = client.put(f"/chat/{chat.webhook_id}/users/me", {"name": "Al"}, format="json")
    assert put.json()["user"]["name"] == "Al"
    assert put.json()["user"]["createdAt"]


def test_refusals_are_not_kept(grant, django_assert_num_queries):
    outsider_bot = BotFactory()
    assert credentials_for_bot(raw=grant["raw"], bot_id=outsider_bot.id) is None
    # Made a member now: let in at once, no invalidation needed.
    member_add(
        workspace=outsider_bot.workspace, account=grant["membership"].account, role=Role.VIEWER
    )
    principal = credentials_for_bot(raw=grant["raw"], bot_id=outsider_bot.id)
    assert principal is not None and principal.role == Role.VIEWER
    with pytest.raises(InvalidToken, match="The token is unknown"):
        credentials_for_bot(raw="bp_pat_" + "x" * 43, bot_id=grant["bot"].id)
    assert len(bot_grants) == 1  # the membership just made
    chat = ChatConnectionFactory(bot=grant["bot"])
    assert chat_user_for_key(connection=chat, chat_user_id="nobody") is None
    UserFactory(bot=grant["bot"], chat_id="nobody")
    assert chat_user_for_key(connection=chat, chat_user_id="nobody") is not None
    assert chat_connection_for_webhook("no-such-webhook") is None


def test_an_expired_kept_token_is_refused(bot, clock, monkeypatch):
    membership = MembershipFactory(workspace=bot.workspace)
    token, raw = access_token_create(account=membership.account, expires_in_days=1)
    assert credentials_for_bot(raw=raw, bot_id=bot.id) is not None
    monkeypatch.setattr(timezone, "now", lambda: token.expires_at)
    with pytest.raises(InvalidToken, match="The token has expired"):
        credentials_for_bot(raw=raw, bot_id=bot.id)


def test_a_cache_of_zero_seconds_reads_every_time(grant, settings, django_assert_num_queries):
    settings.CREDENTIALS_CACHE_SECONDS = 0
    bot_role(grant)
    with django_assert_num_queries(1):
        bot_role(grant)
    assert len(bot_grants) == 0


# --- how long an answer is trusted ----------------------------------------------


def test_without_a_subscriber_an_answer_is_trusted_for_one_second(grant, no_redis, clock):
    assert bot_role(grant) == Role.DEVELOPER
    silently_revoke(grant["token"])
    clock.now += 0.99
    assert refusal(grant) is None  # still the kept answer
    clock.now += 0.01
    assert refusal(grant) == "The token has been revoked"


def test_with_a_subscriber_listening_since_before_the_read_an_answer_lasts(
    grant, listening, clock, settings
):
    settings.CREDENTIALS_CACHE_SECONDS = 60
    assert bot_role(grant) == Role.DEVELOPER
    silently_revoke(grant["token"])
    clock.now += 59.9
    assert refusal(grant) is None
    clock.now += 0.1
    assert refusal(grant) == "The token has been revoked"


def test_an_answer_read_before_the_subscriber_listened_lasts_one_second(grant, listening, clock):
    listening["since"] = clock.now + 0.5  # subscribed after the read began
    assert bot_role(grant) == Role.DEVELOPER
    silently_revoke(grant["token"])
    clock.now += 0.9
    assert refusal(grant) is None
    clock.now += 0.1
    assert refusal(grant) == "The token has been revoked"


def test_when_the_subscriber_loses_redis_answers_last_one_second_again(grant, listening, clock):
    assert bot_role(grant) == Role.DEVELOPER
    silently_revoke(grant["token"])
    clock.now += 5
    assert refusal(grant) is None
    listening["since"] = None
    assert refusal(grant) == "The token has been revoked"


def test_a_setting_below_one_second_is_the_limit(grant, no_redis, clock, settings):
    settings.CREDENTIALS_CACHE_SECONDS = 0.25
    bot_role(grant)
    silently_revoke(grant["token"])
    clock.now += 0.25
    assert refusal(grant) == "The token has been revoked"


def test_an_answer_read_before_an_invalidation_is_not_kept(grant):
    fetch = bot_grants.fetch()
    credentials_changed()  # a write committed while the lookup was reading
    bot_grants.put(fetch, ("digest", "scope"), object())
    assert bot_grants.get(("digest", "scope")) is None


def test_the_cache_keeps_the_most_recently_used(clock):
    cache: CredentialCache[str] = CredentialCache("test", max_entries=2)
    for key in "abc":
        if key == "c":
            assert cache.get("a") == "a"  # used: b is now the oldest
        cache.put(cache.fetch(), key, key)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == ("a", None, "c")


def test_a_forked_child_remembers_nothing_and_listens_for_itself(grant):
    bot_role(grant)
    assert len(bot_grants) == 1
    pid = os.fork()
    if pid == 0:  # the child: no assertion can reach pytest from here, only the exit code
        fresh = len(bot_grants) == 0 and credential_invalidation._process.subscriber is None
        os._exit(0 if fresh else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(bot_grants) == 1


# --- every write that changes an answer makes this process read it again ---------------


def test_revoking_the_token(grant):
    assert refusal(grant) is None
    access_token_revoke(token=grant["token"])
    assert refusal(grant) == "The token has been revoked"


def test_changing_the_role(grant):
    assert bot_role(grant) == Role.DEVELOPER
    member_role_change(membership=grant["membership"], role=Role.VIEWER)
    assert bot_role(grant) == Role.VIEWER
    workspace_id = grant["bot"].workspace_id
    principal = credentials_for_workspace(raw=grant["raw"], workspace_id=workspace_id)
    assert principal is not None and principal.role == Role.VIEWER


def test_removing_the_member(grant):
    MembershipFactory(workspace=grant["bot"].workspace, role=Role.OWNER)
    assert refusal(grant) is None
    member_remove(membership=grant["membership"])
    assert refusal(grant) == "not a member"


def test_deleting_the_bot(grant):
    assert refusal(grant) is None
    bot_delete(bot=Bot.objects.select_related("workspace").get(pk=grant["bot"].pk))
    assert refusal(grant) == "not a member"


def test_deactivating_the_account(grant):
    assert refusal(grant) is None
    account = grant["membership"].account
    account.is_active = False
    account.save()
    assert refusal(grant) == "The token's account is disabled"


def test_signing_in_forgets_nothing(grant, django_assert_num_queries):
    bot_role(grant)
    account = grant["membership"].account
    account.last_login = timezone.now()
    account.save(update_fields=["last_login"])
    with django_assert_num_queries(0):
        bot_role(grant)


def test_deleting_the_account(grant):
    assert refusal(grant) is None
    grant["membership"].account.delete()
    assert refusal(grant) == "The token is unknown"


def test_other_processes_hear_of_a_write_once_it_commits(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        credentials_changed()
    assert callbacks == [credential_invalidation._publish]


# --- ... and so does every such write through the Django admin ---------------------


@pytest.fixture
def superuser(client: Any) -> Any:
    account = AccountFactory(is_staff=True, is_superuser=True)
    client.force_login(account)
    return account


def admin_url(model: Any, kind: str, *args: Any) -> str:
    meta = model._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_{kind}", args=args)


def test_admin_revoking_the_token(grant, client, superuser):
    assert refusal(grant) is None
    response = client.post(admin_url(AccessToken, "revoke", grant["token"].pk))
    assert response.status_code == 302
    assert refusal(grant) == "The token has been revoked"


def test_admin_changing_the_role(grant, client, superuser):
    assert bot_role(grant) == Role.DEVELOPER
    url = admin_url(Membership, "change", grant["membership"].pk)
    assert client.post(url, {"role": Role.VIEWER}).status_code == 302
    assert bot_role(grant) == Role.VIEWER


def test_admin_removing_the_member(grant, client, superuser):
    MembershipFactory(workspace=grant["bot"].workspace, role=Role.OWNER)
    assert refusal(grant) is None
    url = admin_url(Membership, "delete", grant["membership"].pk)
    assert client.post(url, {"post": "yes"}).status_code == 302
    assert refusal(grant) == "not a member"


def test_admin_deleting_the_bot(grant, client, superuser):
    assert refusal(grant) is None
    url = admin_url(Bot, "delete", grant["bot"].pk)
    assert client.post(url, {"post": "yes"}).status_code == 302
    assert refusal(grant) == "not a member"


def test_admin_deleting_the_workspace(grant, client, superuser):
    assert refusal(grant) is None
    url = admin_url(type(grant["bot"].workspace), "delete", grant["bot"].workspace_id)
    assert client.post(url, {"post": "yes"}).status_code == 302
    assert refusal(grant) == "not a member"


def test_admin_deactivating_the_account(grant, client, superuser):
    assert refusal(grant) is None
    account = grant["membership"].account
    form = {
        "username": account.username,
        "email": account.email,
        "date_joined_0": "2025-01-01",
        "date_joined_1": "00:00:00",
        # is_active unticked
    }
    response = client.post(admin_url(get_user_model(), "change", account.pk), form)
    assert response.status_code == 302, response.content
    assert refusal(grant) == "The token's account is disabled"


# --- chat connections and users ------------------------------------------------------


@pytest.fixture
def chat(bot: Bot) -> dict[str, Any]:
    connection = ChatConnectionFactory(bot=bot)
    user = UserFactory(bot=bot)
    key = user_key(connection, user)
    return {"connection": connection, "user": user, "client": APIClient(HTTP_X_USER_KEY=key)}


def me(chat: dict[str, Any]) -> Any:
    """A route that reads nothing of the user but through the credentials."""
    return chat["client"].get(f"/chat/{chat['connection'].webhook_id}/conversations")


def test_deleting_the_chat_user(chat):
    assert me(chat).status_code == 200
    user_delete(user=chat["user"])
    body = assert_error(me(chat), 401, "Unauthorized")
    assert body["message"] == "The user key names a user that does not exist"


def test_deleting_the_chat_user_through_the_chat_interface(chat):
    assert me(chat).status_code == 200
    url = f"/chat/{chat['connection'].webhook_id}/users/me"
    assert chat["client"].delete(url).status_code == 200
    assert assert_error(me(chat), 401, "Unauthorized")


def test_admin_deleting_the_chat_user(chat, client, superuser):
    assert me(chat).status_code == 200
    url = admin_url(User, "delete", chat["user"].pk)
    assert client.post(url, {"post": "yes"}).status_code == 302
    assert_error(me(chat), 401, "Unauthorized")


def test_admin_rotating_the_connections_key(chat, client, superuser):
    assert me(chat).status_code == 200
    connection = chat["connection"]
    url = admin_url(ChatConnection, "change", connection.pk)
    form = {
        "bot": connection.bot_id,
        "name": connection.name,
        "encryption_key": "a-new-key-" + "k" * 30,
        "user_key_mode": connection.user_key_mode,
    }
    assert client.post(url, form).status_code == 302
    body = assert_error(me(chat), 401, "Unauthorized")
    assert body["message"] == "The user key is malformed or not signed for this chat"


def test_admin_deleting_the_connection(chat, client, superuser):
    assert me(chat).status_code == 200
    url = admin_url(ChatConnection, "delete", chat["connection"].pk)
    assert client.post(url, {"post": "yes"}).status_code == 302
    assert_error(me(chat), 404, "ResourceNotFound")


def test_deleting_the_bot_of_a_chat(chat):
    assert me(chat).status_code == 200
    bot_delete(bot=Bot.objects.select_related("workspace").get(pk=chat["connection"].bot_id))
    assert_error(me(chat), 404, "ResourceNotFound")


# --- publishing --------------------------------------------------------------------


def test_a_publish_that_fails_fails_no_write(
    grant, settings, caplog, django_capture_on_commit_callbacks
):
    settings.LIVE_STREAM_REDIS_URL = "redis://127.0.0.1:1/5"  # nothing listens there
    with caplog.at_level(logging.WARNING, logger="platform_site.api.credentials"):
        with django_capture_on_commit_callbacks(execute=True):
            access_token_revoke(token=grant["token"])
    assert AccessToken.objects.get(pk=grant["token"].pk).revoked_at is not None
    assert "could not publish an invalidation" in caplog.text


def test_after_the_commit_this_process_forgets_again(grant, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        credentials_changed()
        bot_role(grant)  # read inside the writing transaction, after the write
        assert len(bot_grants) == 1
    assert len(bot_grants) == 0
