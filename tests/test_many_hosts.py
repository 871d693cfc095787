"""The platform on several machines: two web hosts and two worker hosts
(network namespaces, tests/hosts.py), each its own process tree and DATA_DIR,
against PostgreSQL and Redis on a third (this machine, over the bridge).
What one web host does, the other knows at once (rate limits, a revoked
token, a chat message for a listener on the other); the worker hosts share
the deliveries, and when one is cut off mid-delivery the other delivers
everything it held once its leases expire."""

import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings as django_settings
from django.db import connection

from bots.models import Bot, Role
from bots.selectors.workspace_settings import workspace_settings_get
from bots.services.tokens import access_token_create, access_token_revoke
from bots.services.workspace_settings import workspace_settings_update
from events.models import Event, EventStatus
from tests.factories import BotFactory, ChatConnectionFactory, MembershipFactory, member_token
from tests.hosts import HostServer, HostWorker, Network, network  # noqa: F401
from tests.servers import READ_TIMEOUT, sse_messages
from tests.worker import Workers, celery_queue, wait_until, worker_database_url  # noqa: F401

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql"
        or not django_settings.CELERY_BROKER_URL.startswith(("redis://", "amqp://")),
        reason="hosts share PostgreSQL and a networked broker",
    ),
]

WEB_PORT = 8000  # each host has its own: the same number on every one


@dataclass
class Platform:
    web: list[HostServer]
    workers: list[HostWorker]
    network: Network


@pytest.fixture
def platform(network, settings, tmp_path: Path, celery_queue) -> Iterator[Platform]:  # noqa: F811
    """web1 and web2 serving, worker1 (with beat) and worker2 delivering."""
    engine = Workers(settings=settings, folder=tmp_path, queue=celery_queue)
    base = engine.env()
    base.update(
        {
            # One platform: the same keys on every host, whose data folders differ.
            "SECRET_KEY": django_settings.SECRET_KEY,
            "SECRET_ENCRYPTION_KEYS": ",".join(django_settings.SECRET_ENCRYPTION_KEYS),
            "ALLOWED_HOSTS": "*",
            "RATE_LIMIT_ENABLED": "true",
        }
    )

    def env(name: str) -> dict[str, str]:
        host = network.hosts[name]
        return {
            **base,
            "DATABASE_URL": host.url(worker_database_url()),
            "CELERY_BROKER_URL": host.url(django_settings.CELERY_BROKER_URL),
            "LIVE_STREAM_REDIS_URL": host.url(django_settings.LIVE_STREAM_REDIS_URL),
            "DATA_DIR": str(tmp_path / name),
            "PUBLIC_BASE_URL": f"http://{host.address}:{WEB_PORT}",
        }

    started = Platform(web=[], workers=[], network=network)
    try:
        for name in ("web1", "web2"):
            server = HostServer(
                host=network.hosts[name], env=env(name), folder=tmp_path, port=WEB_PORT
            )
            started.web.append(server)
        for server in started.web:
            server.wait_ready()
        for name, beat in (("worker1", True), ("worker2", False)):
            started.workers.append(
                HostWorker(host=network.hosts[name], env=env(name), folder=tmp_path, beat=beat)
            )
        for worker in started.workers:
            worker.wait_ready()
        yield started
    finally:
        for server in started.web:
            server.stop()
        for worker in started.workers:
            if worker.host.is_cut:
                # A host cut off is gone for the platform: its warm shutdown
                # could reach neither the broker nor the database.
                worker.kill(signal.SIGKILL)
            else:
                worker.terminate()
        for worker in started.workers:
            worker.stop()
        for host in network.hosts.values():
            if host.is_cut:
                host.mend()
        for process in (*started.web, *started.workers):
            print(f"--- {process.name} ---\n{process.log()[-6000:]}")


def sessions_holding_events() -> str:
    """What the database's other sessions are doing, those in a transaction
    first: why events stay out of reach of the claims (which skip locked rows)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, client_addr, state, wait_event_type, wait_event,"
            " now() - xact_start, left(query, 120) FROM pg_stat_activity"
            " WHERE pid <> pg_backend_pid() AND datname = current_database()"
            " ORDER BY xact_start NULLS LAST"
        )
        rows = cursor.fetchall()
    return "sessions:\n" + "\n".join(map(str, rows))


def bearer(token: str, bot: Bot) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "x-bot-id": bot.id}


@pytest.mark.skipif(
    not django_settings.LIVE_STREAM_REDIS_URL,
    reason="web hosts share rate limits, revocations and the live stream through Redis",
)
def test_two_web_hosts_serve_one_platform(platform):
    web1, web2 = platform.web
    bot = BotFactory()
    membership = MembershipFactory(workspace=bot.workspace, role=Role.DEVELOPER)
    kept, token = access_token_create(account=membership.account)
    # A chat user may send 6 messages a minute, on whichever host.
    record = workspace_settings_get(bot.workspace)
    record.chat_user_rate_limit_per_minute = 6
    workspace_settings_update(record=record)
    chat = ChatConnectionFactory(bot=bot).webhook_id

    with httpx.Client(timeout=READ_TIMEOUT) as client:
        # Either host creates, either reads what the other made.
        made = []
        for n in range(10):
            host = (web1, web2)[n % 2]
            answer = client.post(
                f"{host.url}/v1/chat/events",
                json={"type": "host.test", "payload": {"n": n}},
                headers=bearer(token, bot),
            )
            assert answer.status_code == 201, answer.text
            made.append(answer.json()["event"]["id"])
        for n, event_id in enumerate(made):
            host = (web2, web1)[n % 2]
            read = client.get(f"{host.url}/v1/chat/events/{event_id}", headers=bearer(token, bot))
            assert read.status_code == 200, read.text
        for host in (web1, web2):
            assert host.log().count("POST /v1/chat/events 201") == 5

        # A message sent through web1 reaches the listener on web2.
        user = client.post(f"{web1.url}/chat/{chat}/users", json={"name": "Ada"})
        assert user.status_code == 201, user.text
        key = {"x-user-key": user.json()["key"]}
        conversation = client.post(f"{web2.url}/chat/{chat}/conversations", json={}, headers=key)
        assert conversation.status_code == 201, conversation.text
        conversation_id = conversation.json()["conversation"]["id"]
        listen = f"{web2.url}/chat/{chat}/conversations/{conversation_id}/listen"
        with client.stream("GET", listen, headers=key) as stream:
            assert stream.status_code == 200
            heard = (m for m in sse_messages(stream) if m["type"] != "ping")
            sent = client.post(
                f"{web1.url}/chat/{chat}/messages",
                json={"conversationId": conversation_id, "payload": {"type": "text", "text": "hi"}},
                headers=key,
            )
            assert sent.status_code == 201, sent.text
            assert next(heard) == {
                "type": "message_created",
                "data": {**sent.json()["message"], "isBot": False},
            }

        # The user's limit (6 requests a minute, some spent above) counts on
        # both hosts together: a few more are taken, then each host refuses.
        statuses = [
            client.post(
                f"{(web1, web2)[n % 2].url}/chat/{chat}/messages",
                json={
                    "conversationId": conversation_id,
                    "payload": {"type": "text", "text": "again"},
                },
                headers=key,
            ).status_code
            for n in range(10)
        ]
        taken = statuses.count(201)
        assert 1 <= taken <= 5 and statuses == [201] * taken + [429] * (10 - taken), statuses
        assert {n % 2 for n, status in enumerate(statuses) if status == 429} == {0, 1}

        # A token revoked here is refused by both hosts, which had it cached.
        access_token_revoke(token=kept)

        def refused() -> bool:
            return all(
                client.get(f"{host.url}/v1/chat/events", headers=bearer(token, bot)).status_code
                == 401
                for host in (web1, web2)
            )

        wait_until(refused, timeout=1.0, message="both hosts to refuse the revoked token")


class Receiver:
    """A bot's webhook on this machine, on the bridge: it notes which host
    delivered each event, and answers after `delay` seconds."""

    def __init__(self, address: str, delay: float) -> None:
        # (event id, the host's address, when it arrived)
        self.deliveries: list[tuple[str, str, float]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                arrived = time.monotonic()
                del body
                with receiver.lock:
                    receiver.deliveries.append(
                        (self.headers["webhook-id"], self.client_address[0], arrived)
                    )
                time.sleep(delay)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer((address, 0), Handler)
        self.url = f"http://{address}:{self.httpd.server_port}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def by_host(self, since: float = 0.0) -> dict[str, set[str]]:
        """Event ids delivered by each host's address (arrived from `since` on)."""
        with self.lock:
            found: dict[str, set[str]] = {}
            for event_id, address, arrived in self.deliveries:
                if arrived >= since:
                    found.setdefault(address, set()).add(event_id)
            return found

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def receiver(network) -> Iterator[Receiver]:  # noqa: F811
    running = Receiver(network.gateway, delay=0.3)
    yield running
    running.close()


def test_worker_hosts_share_deliveries_and_one_cut_off_loses_nothing(platform, receiver):
    web1, web2 = platform.web
    worker1, worker2 = (platform.network.hosts[name] for name in ("worker1", "worker2"))
    first = BotFactory(webhook_url=receiver.url)
    bots = [first]
    bots += [BotFactory(workspace=first.workspace, webhook_url=receiver.url) for _ in range(4)]
    token = member_token(first.workspace)

    with httpx.Client(timeout=READ_TIMEOUT) as client:
        made = []
        for n in range(100):
            bot = bots[n % len(bots)]
            answer = client.post(
                f"{(web1, web2)[n % 2].url}/v1/chat/events",
                json={"type": "host.delivery", "payload": {"n": n}},
                headers=bearer(token, bot),
            )
            assert answer.status_code == 201, answer.text
            made.append(answer.json()["event"]["id"])

    # Both worker hosts deliver; then worker2's link goes down mid-delivery.
    wait_until(
        lambda: {worker1.address, worker2.address} <= set(receiver.by_host()),
        timeout=30,
        message=lambda: f"both worker hosts to deliver: {sorted(receiver.by_host())}",
    )
    worker2.cut()
    cut_at = time.monotonic()

    def all_processed() -> bool:
        return Event.objects.filter(id__in=made, status=EventStatus.PROCESSED).count() == len(made)

    wait_until(
        all_processed,
        timeout=60,
        message=lambda: (
            "every event processed: "
            + str(Event.objects.filter(id__in=made).values_list("status").distinct())
            + "\n"
            + sessions_holding_events()
        ),
    )
    delivered = receiver.by_host()
    assert set(made) <= set().union(*delivered.values())
    # From the cut on only worker1 reached the bot, and it delivered again
    # what worker2 held when its link went down (leased, never recorded).
    after = receiver.by_host(since=cut_at + 0.5)
    assert set(after) == {worker1.address}, sorted(after)
    assert delivered[worker2.address] & after[worker1.address], "worker2 held nothing when cut"
    # Every bot's events all went out: none starved by another's.
    for bot in bots:
        assert (
            Event.objects.filter(bot=bot, id__in=made, status=EventStatus.PROCESSED).count() == 20
        )
