"""Rate limits: the algorithm in memory and in Redis, the policies of each
interface, the headers, the 429, staff changing a limit, and the limiter's
own failure letting requests through."""

import logging
import re
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from asgiref.sync import async_to_sync
from django.conf import settings as django_settings
from rest_framework.test import APIClient

from bots.models import AccessToken, Role, WorkspaceSettings
from bots.selectors.workspace_settings import workspace_settings_get
from bots.services.workspace_settings import workspace_settings_update
from chat.keys import user_key_issue
from chat.live.access import listener_admit
from platform_site.api import rate_limit
from platform_site.api.errors import RateLimited
from platform_site.api.rate_limit import MemoryLimiter, Policy, RedisLimiter, rate_limit_headers
from platform_site.api.throttling import client_address
from tests.conftest import admin_api, assert_error, runtime_api, upload
from tests.factories import (
    ChatConnectionFactory,
    ConversationFactory,
    ParticipantFactory,
    UserFactory,
    member_token,
)

REDIS_URL: str = django_settings.LIVE_STREAM_REDIS_URL


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def counters(request: Any) -> str:
    """A Redis key prefix of this test's own, in this run: counts left by an
    earlier run live a minute."""
    return f"ratelimit-test:{request.node.name}:{uuid.uuid4().hex}:"


@pytest.fixture(params=["memory", "redis"])
def a_limiter(request: Any) -> Iterator[MemoryLimiter | RedisLimiter]:
    if request.param == "memory":
        yield MemoryLimiter()
        return
    if not REDIS_URL:
        pytest.skip("no Redis configured (LIVE_STREAM_REDIS_URL is empty)")
    prefix = counters(request)
    yield RedisLimiter(REDIS_URL, prefix=prefix)
    keys = redis.Redis.from_url(REDIS_URL).keys(f"{prefix}*")
    if keys:
        redis.Redis.from_url(REDIS_URL).delete(*keys)


@pytest.fixture
def limiter_in_use(settings: Any) -> Iterator[None]:
    """The limiter the settings name, built afresh for this test's settings."""
    rate_limit.limiter.cache_clear()
    yield
    rate_limit.limiter.cache_clear()


def test_a_quiet_key_bursts_its_limit_then_waits_an_interval(a_limiter):
    policy = Policy("p", "k", limit=5, window=60)
    decisions = [a_limiter.hit([policy]) for _ in range(6)]
    assert [d.allowed for d in decisions] == [True] * 5 + [False]
    assert [d.quotas[0].remaining for d in decisions] == [4, 3, 2, 1, 0, 0]
    # One request comes back every 60 / 5 = 12 s.
    assert 11.0 < decisions[-1].retry_after <= 12.0
    assert all(d.quotas[0].reset in (12, 24, 36, 48, 60) for d in decisions[:5])
    assert decisions[4].quotas[0].reset == 60


def test_a_refusal_by_one_policy_counts_against_none(a_limiter):
    tight = Policy("tight", "a", limit=1, window=60)
    loose = Policy("loose", "b", limit=100, window=60)
    assert a_limiter.hit([tight, loose]).allowed
    refused = a_limiter.hit([tight, loose])
    assert not refused.allowed
    assert refused.quotas[1].remaining == 99  # the refused request did not count
    assert a_limiter.hit([loose]).quotas[0].remaining == 98


def test_keys_are_counted_apart(a_limiter):
    assert a_limiter.hit([Policy("p", "one", limit=1)]).allowed
    assert not a_limiter.hit([Policy("p", "one", limit=1)]).allowed
    assert a_limiter.hit([Policy("p", "two", limit=1)]).allowed


@pytest.mark.skipif(not REDIS_URL, reason="no Redis configured (LIVE_STREAM_REDIS_URL is empty)")
def test_limiters_sharing_redis_share_the_count(request):
    """Two web processes are two limiters on one Redis: together they allow the limit."""
    prefix = counters(request)
    first, second = RedisLimiter(REDIS_URL, prefix=prefix), RedisLimiter(REDIS_URL, prefix=prefix)
    policy = Policy("p", "shared", limit=10)
    allowed = sum(limiter.hit([policy]).allowed for _ in range(10) for limiter in (first, second))
    assert allowed == 10


def test_redis_out_of_reach_lets_requests_through_and_says_so(caplog):
    down = RedisLimiter(f"redis://127.0.0.1:{_free_port()}/0", prefix="x:")
    with caplog.at_level(logging.WARNING, logger="platform_site.rate_limit"):
        assert down.hit([Policy("p", "k", limit=1)]) is None
        # Left alone for a while: no second connection attempt, no second line.
        assert down.hit([Policy("p", "k", limit=1)]) is None
    warnings = [r for r in caplog.records if "rate limits not enforced" in r.getMessage()]
    assert len(warnings) == 1


def test_headers_follow_the_ietf_draft():
    decision = MemoryLimiter().hit(
        [Policy("workspace", "w", limit=600), Policy("token", "t", limit=3000)]
    )
    assert rate_limit_headers(decision) == {
        "RateLimit-Policy": '"workspace";q=600;w=60, "token";q=3000;w=60',
        "RateLimit": '"workspace";r=599;t=1, "token";r=2999;t=1',
    }


@pytest.mark.parametrize(
    ("remote", "kept_as"),
    [
        ("203.0.113.9", "203.0.113.9"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"),
        ("::ffff:203.0.113.9", "203.0.113.9"),
        ("", ""),
    ],
)
def test_client_address(remote, kept_as):
    assert client_address(remote) == kept_as


# --- through the API ---------------------------------------------------------


def _limit(workspace: Any, **limits: int) -> None:
    record = workspace_settings_get(workspace)
    for name, value in limits.items():
        setattr(record, name, value)
    workspace_settings_update(record=record)


def _parse(header: str) -> dict[str, dict[str, int]]:
    items = {}
    for item in header.split(", "):
        name, *params = item.split(";")
        items[name.strip('"')] = {k: int(v) for k, v in (p.split("=") for p in params)}
    return items


def _assert_rate_limited(response: Any) -> None:
    body = assert_error(response, 429, "RateLimited")
    assert re.fullmatch(r"[1-9][0-9]*", response["Retry-After"])
    assert response["Retry-After"] in body["message"]
    assert _parse(response["RateLimit"])


def test_runtime_workspace_limit(db, bot, limiter_in_use):
    _limit(bot.workspace, rate_limit_per_minute=3)
    client = runtime_api(member_token(bot.workspace), bot.id)
    answers = [client.get("/v1/chat/events") for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert _parse(answers[0]["RateLimit-Policy"]) == {
        "workspace": {"q": 3, "w": 60},
        "token": {"q": django_settings.TOKEN_RATE_LIMIT_PER_MINUTE, "w": 60},
    }
    assert [_parse(a["RateLimit"])["workspace"]["r"] for a in answers] == [2, 1, 0, 0]
    _assert_rate_limited(answers[3])
    assert 19 <= int(answers[3]["Retry-After"]) <= 20
    # The workspace's tokens count together, and writes as reads.
    other = runtime_api(member_token(bot.workspace), bot.id)
    _assert_rate_limited(other.post("/v1/chat/events", {"type": "t", "payload": {}}, format="json"))


def test_admin_api_counts_against_the_same_workspace_limit(db, bot, limiter_in_use):
    _limit(bot.workspace, rate_limit_per_minute=2)
    token = member_token(bot.workspace, Role.ADMINISTRATOR)
    assert runtime_api(token, bot.id).get("/v1/chat/events").status_code == 200
    assert admin_api(token, bot.workspace_id).get("/v1/admin/bots").status_code == 200
    _assert_rate_limited(admin_api(token, bot.workspace_id).get("/v1/admin/bots"))


def test_a_token_ceiling_holds_across_workspaces(db, bot, limiter_in_use):
    token = member_token(bot.workspace)
    AccessToken.objects.update(rate_limit_per_minute=2)
    client = runtime_api(token, bot.id)
    assert [client.get("/v1/chat/events").status_code for _ in range(3)] == [200, 200, 429]
    refused = client.get("/v1/chat/events")
    assert _parse(refused["RateLimit"])["token"]["r"] == 0
    assert _parse(refused["RateLimit"])["workspace"]["r"] > 0


def test_staff_raising_a_limit_takes_effect_at_once(db, bot, limiter_in_use):
    _limit(bot.workspace, rate_limit_per_minute=1)
    client = runtime_api(member_token(bot.workspace), bot.id)
    assert client.get("/v1/chat/events").status_code == 200
    assert client.get("/v1/chat/events").status_code == 429
    # As the Django admin saves it (bots/admin/workspaces.py): through the service.
    _limit(bot.workspace, rate_limit_per_minute=1000)
    answer = client.get("/v1/chat/events")
    assert answer.status_code == 200
    assert _parse(answer["RateLimit-Policy"])["workspace"]["q"] == 1000


def test_a_workspace_without_settings_has_the_default(db, bot, limiter_in_use):
    WorkspaceSettings.objects.filter(workspace=bot.workspace).delete()
    answer = runtime_api(member_token(bot.workspace), bot.id).get("/v1/chat/events")
    assert answer.status_code == 200
    assert _parse(answer["RateLimit-Policy"])["workspace"]["q"] == 600


def test_unlimited_routes_and_refusals_before_credentials(db, bot, limiter_in_use):
    _limit(bot.workspace, rate_limit_per_minute=1)
    assert "RateLimit" not in APIClient().get("/healthz")
    # A 401 is not counted against the workspace it names.
    for _ in range(3):
        answer = runtime_api("bp_pat_unknown", bot.id).get("/v1/chat/events")
        assert answer.status_code == 401
    assert (
        runtime_api(member_token(bot.workspace), bot.id).get("/v1/chat/events").status_code == 200
    )


def test_rate_limits_off(db, bot, settings, limiter_in_use):
    settings.RATE_LIMIT_ENABLED = False
    _limit(bot.workspace, rate_limit_per_minute=1)
    client = runtime_api(member_token(bot.workspace), bot.id)
    answers = [client.get("/v1/chat/events") for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert "RateLimit" not in answers[0]


def test_limiter_down_lets_requests_through(db, bot, settings, limiter_in_use, caplog):
    settings.RATE_LIMIT_REDIS_URL = f"redis://127.0.0.1:{_free_port()}/0"
    _limit(bot.workspace, rate_limit_per_minute=1)
    client = runtime_api(member_token(bot.workspace), bot.id)
    with caplog.at_level(logging.WARNING, logger="platform_site.rate_limit"):
        answers = [client.get("/v1/chat/events") for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert "RateLimit" not in answers[0]
    assert any("rate limits not enforced" in r.getMessage() for r in caplog.records)


@pytest.fixture
def connection(bot: Any) -> Any:
    return ChatConnectionFactory(bot=bot)


def _chat(connection: Any, user: Any = None, address: str = "198.51.100.7") -> APIClient:
    client = APIClient(REMOTE_ADDR=address)
    if user is not None:
        client.credentials(
            HTTP_X_USER_KEY=user_key_issue(connection=connection, chat_user_id=user.chat_id)
        )
    return client


def test_chat_user_limit(db, bot, connection, limiter_in_use):
    _limit(bot.workspace, chat_user_rate_limit_per_minute=2)
    user = UserFactory(bot=bot)
    url = f"/chat/{connection.webhook_id}/users/me"
    client = _chat(connection, user)
    answers = [client.get(url) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert set(_parse(answers[0]["RateLimit-Policy"])) == {"address", "user"}
    _assert_rate_limited(answers[2])
    # Browsers may read where they stand.
    exposed = _chat(connection, user).get(url, HTTP_ORIGIN="https://shop.example")
    assert "ratelimit" in exposed["Access-Control-Expose-Headers"].lower()
    # Another user from the same address is not held back by the first.
    other = UserFactory(bot=bot)
    assert _chat(connection, other).get(url).status_code == 200


def test_chat_address_limit_covers_requests_without_a_key(db, bot, connection, limiter_in_use):
    _limit(bot.workspace, chat_address_rate_limit_per_minute=2)
    hello = f"/chat/{connection.webhook_id}/hello"
    assert _chat(connection).get(hello).status_code == 200
    assert (
        _chat(connection)
        .post(f"/chat/{connection.webhook_id}/users", {}, format="json")
        .status_code
        == 201
    )
    _assert_rate_limited(_chat(connection).get(hello))
    assert _chat(connection, address="198.51.100.8").get(hello).status_code == 200
    assert _parse(_chat(connection, address="198.51.100.8").get(hello)["RateLimit"]) == {
        "address": {"r": 0, "t": 60}
    }


def test_the_live_stream_counts_as_a_chat_request(db, bot, connection, limiter_in_use):
    _limit(bot.workspace, chat_user_rate_limit_per_minute=1)
    user = UserFactory(bot=bot)
    conversation = ConversationFactory(bot=bot)
    ParticipantFactory(conversation=conversation, user=user)

    def admit() -> Any:
        return async_to_sync(listener_admit)(
            webhook_id=connection.webhook_id,
            method="GET",
            key=user_key_issue(connection=connection, chat_user_id=user.chat_id),
            conversation_chat_id=conversation.chat_id,
            remote_addr="198.51.100.7",
        )

    listener = admit()
    assert _parse(rate_limit_headers(listener.rate_limit)["RateLimit"])["user"]["r"] == 0
    with pytest.raises(RateLimited) as refused:
        admit()
    assert refused.value.headers["Retry-After"] == "60"
    assert _parse(refused.value.headers["RateLimit"])["user"] == {"r": 0, "t": 60}


def test_signed_urls_count_against_the_files_workspace(db, bot, file_storage, limiter_in_use):
    _limit(bot.workspace, rate_limit_per_minute=3)
    client = runtime_api(member_token(bot.workspace), bot.id)
    created = client.put("/v1/files", {"key": "a.txt", "size": 2}, format="json")
    assert created.status_code == 200, created.content
    sent = upload(client, created.json()["file"]["uploadUrl"], b"hi", "text/plain")
    assert sent.status_code == 200, sent.content
    assert _parse(sent["RateLimit"]) == {"workspace": {"r": 1, "t": 40}}
    url = sent.json()["file"]["url"]
    path = "/" + url.split("://", 1)[1].split("/", 1)[1]
    assert APIClient().get(path).status_code == 200
    _assert_rate_limited(APIClient().get(path))
    _assert_rate_limited(client.get("/v1/files"))
    # A URL that is not signed is refused as before, and counts against nothing.
    assert_error(APIClient().get("/v1/downloads/forged"), 403, "Forbidden")


@pytest.mark.skipif(not REDIS_URL, reason="no Redis configured (LIVE_STREAM_REDIS_URL is empty)")
def test_a_redis_that_forgot_the_script_is_taught_it_again(request):
    limiter = RedisLimiter(REDIS_URL, prefix=counters(request))
    assert limiter.hit([Policy("p", "k", limit=3)]).allowed
    redis.Redis.from_url(REDIS_URL).script_flush()  # as a restarted Redis
    assert limiter.hit([Policy("p", "k", limit=3)]).quotas[0].remaining == 1


@pytest.mark.skipif(not REDIS_URL, reason="no Redis configured (LIVE_STREAM_REDIS_URL is empty)")
def test_a_dropped_connection_costs_one_unlimited_request(request, monkeypatch):
    monkeypatch.setattr(rate_limit, "RETRY_AFTER", 0.0)
    limiter = RedisLimiter(REDIS_URL, prefix=counters(request))
    policy = Policy("p", "k", limit=3)
    assert limiter.hit([policy]).allowed
    host, port = limiter._local.wire._sock.getsockname()[:2]
    redis.Redis.from_url(REDIS_URL).client_kill_filter(addr=f"{host}:{port}")
    assert limiter.hit([policy]) is None  # the request goes through, unlimited
    assert limiter.hit([policy]).quotas[0].remaining == 1  # a new connection, the same count
