import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from rest_framework.test import APIClient

from bots.models import Bot, Role, Workspace
from platform_site.api.rate_limit import MemoryLimiter, limiter
from platform_site.foundation import credential_cache, credential_invalidation
from platform_site.foundation.credential_cache import credential_caches_clear
from platform_site.observability.log_handler import BatchedStreamHandler
from tests.factories import BotFactory, WorkspaceFactory, member_token
from tests.receiver import Receiver, running_receiver


def runtime_api(token: str, bot_id: str) -> APIClient:
    """A client of the runtime API with a raw token and a bot id."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_X_BOT_ID=bot_id)
    return client


def admin_api(token: str, workspace_id: str) -> APIClient:
    """A client of the admin API with a raw token and a workspace id."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_X_WORKSPACE_ID=workspace_id)
    return client


@pytest.fixture(autouse=True, scope="session")
def _log_lines_unbatched() -> None:
    """This process writes its log lines as they are made, as the servers
    and workers the tests start do (tests/servers.py, tests/worker.py): held
    back, they would come out after pytest's summary."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, BatchedStreamHandler):
            handler.flush()
            handler.flush_seconds = 0


@pytest.fixture(autouse=True)
def _fresh_credential_caches() -> None:
    """Each test's database starts afresh (rolled back), so does what this
    process remembers of it, rate limits included (in Redis they are keyed by
    ids no other test has)."""
    credential_caches_clear()
    if isinstance(limiter(), MemoryLimiter):
        limiter().clear()


_COUNTING_FIXTURES = {"django_assert_num_queries", "django_assert_max_num_queries"}


@pytest.fixture(autouse=True)
def _deaf_to_other_test_processes(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The suite's processes share one Redis, and every process hears every
    credential invalidation: another test's revocation would make this one's
    kept answers go at any moment, and its query counts with them. This
    process's own invalidations are still heard, and tests marked
    `hears_invalidations` hear everything."""
    if request.node.get_closest_marker("hears_invalidations"):
        return
    forget = credential_invalidation._forget

    def forget_unless_heard() -> None:
        if threading.current_thread().name != credential_invalidation.SUBSCRIBER_THREAD:
            forget()

    monkeypatch.setattr(credential_invalidation, "_forget", forget_unless_heard)


@pytest.fixture(autouse=True)
def _credentials_ageless_while_counting(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test that counts a request's queries counts on the credentials an
    earlier request read being kept, and an answer read before the subscriber
    listened is trusted for one second only, which a loaded machine can take
    between two requests. Tests of the cache's ageing set its clock themselves."""
    if _COUNTING_FIXTURES & set(request.fixturenames):
        monkeypatch.setattr(credential_cache, "clock", lambda: 0.0)


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()


@pytest.fixture
def workspace(db: Any) -> Workspace:
    return WorkspaceFactory()


@pytest.fixture
def bot(workspace: Workspace) -> Bot:
    return BotFactory(workspace=workspace)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A local HTTP server standing in for a bot's webhook receiver."""
    with running_receiver() as running:
        yield running


@pytest.fixture
def hooked(bot: Bot, receiver: Receiver) -> Bot:
    """The bot, with the receiver as its webhook."""
    bot.webhook_url = receiver.url
    bot.save(update_fields=["webhook_url"])
    return bot


@pytest.fixture
def runtime_client(bot: Bot) -> Callable[..., APIClient]:
    """An APIClient speaking for `bot` with the token of a member of the given role."""

    def make(role: str = Role.DEVELOPER, *, for_bot: Bot | None = None) -> APIClient:
        target = for_bot or bot
        return runtime_api(member_token(target.workspace, role), target.id)

    return make


@pytest.fixture
def admin_client(workspace: Workspace) -> Callable[..., APIClient]:
    """An APIClient on the admin API of `workspace` with a member of the given role."""

    def make(role: str = Role.DEVELOPER, *, for_workspace: Workspace | None = None) -> APIClient:
        target = for_workspace or workspace
        return admin_api(member_token(target, role), target.id)

    return make


@dataclass
class Answer:
    """A complete answer from an ASGI application driven in-process, shaped
    for assert_error."""

    status_code: int
    headers: dict[str, str]
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)


def assert_error(response: Any, status: int, error_type: str) -> dict[str, Any]:
    """The response is the contract's one error body with this status and type."""
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"id", "code", "type", "message"}, body
    assert body["code"] == status
    assert body["type"] == error_type
    assert body["id"].startswith("err_")
    assert body["message"]
    return body


@pytest.fixture
def file_storage(settings: Any, tmp_path: Any) -> Any:
    """Files' bytes in a folder of the test's own."""
    settings.STORAGES = {
        **settings.STORAGES,
        "files": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "files")},
        },
    }
    return tmp_path / "files"


def upload(client: APIClient, upload_url: str, data: bytes, content_type: str) -> Any:
    """PUT the bytes to a file's signed upload URL, as a client would: no credentials."""
    path = upload_url.split("://", 1)[1].split("/", 1)[1]
    return APIClient().put(f"/{path}", data=data, content_type=content_type)
