"""Invalidations over Redis (LIVE_STREAM_REDIS_URL): a change written in one
process reaches what another process remembers within a second. Skipped on
the embedded defaults, which have no Redis."""

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
from django.conf import settings as django_settings
from redis.connection import parse_url

from bots.models import AccessToken, Bot, Membership, Role
from bots.services.bots import bot_delete
from bots.services.members import member_remove, member_role_change
from bots.services.tokens import access_token_create, access_token_revoke
from chat.services.users import user_delete
from platform_site.api.credentials import bot_grants
from platform_site.foundation import credential_invalidation
from platform_site.foundation.credential_invalidation import channel_name, listening_since
from tests.factories import (
    BotFactory,
    ChatConnectionFactory,
    MembershipFactory,
    UserFactory,
)
from tests.worker import PROJECT_DIR, worker_database_url


def _private_bus(url: str) -> str:
    """The configured Redis on a database of this test process's own: the
    channel carries the database number, so the other test processes'
    invalidations (every revocation they make) stay off this module's
    channel, and a kept answer changes only by what these tests write."""
    if not url:
        return url
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    configured = int(parse_url(url).get("db", 0))
    free = [db for db in range(16) if db != configured]
    return urlsplit(url)._replace(path=f"/{free[worker % len(free)]}").geturl()


REDIS_URL: str = _private_bus(django_settings.LIVE_STREAM_REDIS_URL)
TIMEOUT = 10.0
# What the task promises: refused everywhere within a second of the commit.
WITHIN = 1.0

pytestmark = [
    pytest.mark.integration,
    pytest.mark.hears_invalidations,
    pytest.mark.skipif(
        not REDIS_URL,
        reason="no Redis configured: LIVE_STREAM_REDIS_URL is empty (the embedded "
        "defaults have no invalidation subscriber)",
    ),
]


def wait_for(condition: Callable[[], Any], what: str, timeout: float = TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not met within {timeout} s: {what}")
        time.sleep(0.01)
    return result


@pytest.fixture(autouse=True)
def _on_the_private_bus(settings: Any) -> None:
    settings.LIVE_STREAM_REDIS_URL = REDIS_URL


@pytest.fixture
def raw_redis() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    yield client
    client.close()


def subscriber_client_id(raw_redis: redis.Redis, pid: int) -> str | None:
    """The connection of this process's subscriber on this module's bus:
    the newest of its name there (the subscriber a test before used, on
    the suite's bus, may still be closing its own)."""
    db = str(parse_url(REDIS_URL).get("db", 0))
    ids = [
        int(client["id"])
        for client in raw_redis.client_list()
        if client.get("name") == f"credentials-{pid}" and client.get("db") == db
    ]
    return str(max(ids)) if ids else None


# --- this process's subscriber -------------------------------------------------------


def test_the_subscriber_listens_and_forgets_what_is_published(db, raw_redis):
    since = wait_for(listening_since, "the subscriber listens")
    assert since <= time.monotonic()
    bot_grants.put(bot_grants.fetch(), ("digest", "scope"), object())
    assert len(bot_grants) == 1
    raw_redis.publish(channel_name(REDIS_URL), "forget")
    wait_for(lambda: len(bot_grants) == 0, "the published invalidation is heard")


def test_a_lost_connection_makes_the_process_deaf_at_once_then_it_listens_anew(
    db, raw_redis, monkeypatch
):
    monkeypatch.setattr(credential_invalidation, "RECONNECT_MIN_DELAY", 0.05)
    before = wait_for(listening_since, "the subscriber listens")
    client_id = wait_for(lambda: subscriber_client_id(raw_redis, os.getpid()), "its client")
    raw_redis.client_kill_filter(_id=client_id)
    wait_for(lambda: listening_since() is None, "the subscriber knows it lost Redis", timeout=1.0)
    after = wait_for(listening_since, "the subscriber listens again")
    assert after > before


def test_the_channel_carries_the_database_number():
    assert channel_name("redis://127.0.0.1:6379/5") == "db5:credentials:invalidate"
    assert channel_name("redis://127.0.0.1:6379") == "db0:credentials:invalidate"


# --- another process -----------------------------------------------------------------


class Child:
    """tests/credential_child.py, on the test database and Redis."""

    def __init__(self, folder: Path) -> None:
        env = dict(os.environ)
        env.update(
            {
                "DATABASE_URL": worker_database_url(),
                "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL,
                "DATA_DIR": str(django_settings.DATA_DIR),
                "LIVE_STREAM_REDIS_URL": REDIS_URL,
                "CREDENTIALS_CACHE_SECONDS": "60",
                "PYTHONUNBUFFERED": "1",
            }
        )
        self.log_path = folder / "credential_child.log"
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.credential_child"],
                cwd=PROJECT_DIR,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        self._read()  # {"ready": pid}

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], TIMEOUT)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            raise AssertionError(f"the child did not answer:\n{self.log_path.read_text()}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def ask(self, **request: Any) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self._read()

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def child(tmp_path: Path) -> Iterator[Child]:
    running = Child(tmp_path)
    yield running
    running.stop()
    print(f"--- credential child ---\n{running.log_path.read_text()}", file=sys.stderr)


def kept(child: Child, **request: Any) -> dict[str, Any]:
    """The child's answer, asked twice: the second time from what it kept."""
    first = child.ask(**request)
    second = child.ask(**request)
    assert second["queries"] == 0, second
    assert {**second, "queries": None} == {**first, "queries": None}
    return second


def changes_within_a_second(child: Child, request: dict[str, Any], write: Callable[[], Any]) -> Any:
    """Run the write (it commits and publishes as it returns), then the
    child's answer, which must change within WITHIN seconds."""

    def said(answer: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in answer.items() if key != "queries"}

    before = said(kept(child, **request))
    write()
    committed = time.monotonic()
    while said(answer := child.ask(**request)) == before:
        assert time.monotonic() - committed < WITHIN, f"still {answer} after {WITHIN} s"
    assert answer["queries"] > 0, answer  # read again, from the database
    return answer


@pytest.mark.django_db(transaction=True)
def test_another_process_refuses_within_a_second(child):
    wait_for(lambda: child.ask(op="listening")["listening"], "the child's subscriber listens")
    bot = BotFactory()
    MembershipFactory(workspace=bot.workspace, role=Role.OWNER)

    def member() -> tuple[Membership, AccessToken, dict[str, Any]]:
        membership = MembershipFactory(workspace=bot.workspace, role=Role.DEVELOPER)
        token, raw = access_token_create(account=membership.account)
        return membership, token, {"op": "bot", "raw": raw, "scope": bot.id}

    # A write the child hears nothing of: it keeps its answer longer than the
    # 1 s rule would, so what follows is the invalidations' work.
    membership, _, request = member()
    assert kept(child, **request)["role"] == Role.DEVELOPER
    Membership.objects.filter(pk=membership.pk).update(role=Role.VIEWER)
    time.sleep(1.2)
    assert child.ask(**request) == {"role": Role.DEVELOPER, "queries": 0}

    _, token, request = member()
    answer = changes_within_a_second(child, request, lambda: access_token_revoke(token=token))
    assert answer["error"] == "The token has been revoked"

    membership, _, request = member()
    answer = changes_within_a_second(
        child, request, lambda: member_role_change(membership=membership, role=Role.VIEWER)
    )
    assert answer["role"] == Role.VIEWER

    membership, _, request = member()
    answer = changes_within_a_second(child, request, lambda: member_remove(membership=membership))
    assert answer["role"] is None

    _, _, request = member()
    workspace_request = {**request, "op": "workspace", "scope": bot.workspace_id}
    assert kept(child, **workspace_request)["role"] == Role.DEVELOPER
    stored = Bot.objects.select_related("workspace").get(pk=bot.pk)
    answer = changes_within_a_second(child, request, lambda: bot_delete(bot=stored))
    assert answer["role"] is None
    # The deletion forgot every answer, the workspace's too (read again, unchanged).
    assert child.ask(**workspace_request) == {"role": Role.DEVELOPER, "queries": 1}


@pytest.mark.django_db(transaction=True)
def test_another_process_forgets_a_deleted_chat_user_within_a_second(child):
    wait_for(lambda: child.ask(op="listening")["listening"], "the child's subscriber listens")
    chat = ChatConnectionFactory()
    user = UserFactory(bot=chat.bot)
    request = {"op": "chat", "webhook": chat.webhook_id, "chat_user": user.chat_id}
    assert kept(child, **request)["user"] == user.pk
    answer = changes_within_a_second(child, request, lambda: user_delete(user=user))
    assert answer["user"] is None
