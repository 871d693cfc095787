"""Prometheus metrics in this process (platform_site/observability/metrics.py): what each
request, event, delivery, indexing run, rate-limit refusal and live listener
counts, read back from the multiprocess registry, and GET /metrics itself:
who may read it and what it reads from the events table.

The metric files are shared by every test of the run (and by the processes
some start), so each test compares the values after with those before."""

from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from bots.models import AccessToken, Bot, Workspace
from bots.selectors.workspace_settings import workspace_settings_get
from bots.services.workspace_settings import workspace_settings_update
from events.engine.claims import deliveries_claim
from events.engine.loop import EngineConfig
from events.engine.process import EngineThread
from events.models import Event, EventStatus
from events.services.events import event_record
from files.models import File, FileStatus
from files.services.file_index import IndexingOutcome, file_index, files_requeue_stalled
from platform_site.api import metrics_endpoint, rate_limit
from platform_site.observability import metrics
from platform_site.observability.metrics_files import host_registry
from tests.conftest import assert_error, runtime_api, upload
from tests.documents import garbage_pdf
from tests.factories import (
    BotFactory,
    ChatConnectionFactory,
    ConversationFactory,
    EventFactory,
    ParticipantFactory,
    UserFactory,
    member_token,
    user_key,
)
from tests.receiver import Answer, Receiver
from tests.test_chat_live import Exchange, ServerLoop
from tests.worker import wait_until

EVENTS_URL = "/v1/chat/events"
EVENTS_ROUTE = "/v1/chat/events"
EVENT_ROUTE = "/v1/chat/events/<str:event_id>"
CANCEL_ROUTE = "/v1/chat/events/scheduled/<str:event_id>"
EVENT = {"type": "order.created", "payload": {"order": 1}}
ELSEWHERE = "203.0.113.9"

Key = tuple[str, frozenset[tuple[str, str]]]


def samples() -> dict[Key, float]:
    """Every sample of the metric files, summed over every process."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in host_registry().collect()
        for sample in family.samples
    }


class Since:
    """How much a series grew since this was made."""

    def __init__(self) -> None:
        self.before = samples()

    def __call__(self, name: str, **labels: str) -> float:
        key = (name, frozenset(labels.items()))
        return samples().get(key, 0.0) - self.before.get(key, 0.0)


@pytest.fixture
def since() -> Callable[[], Since]:
    return Since


def answered(grown: Since, route: str, method: str, status: int) -> float:
    """Requests counted on the route, with that method and status."""
    return grown("platform_http_requests_total", route=route, method=method, status=str(status))


def timed(grown: Since, route: str, method: str) -> float:
    """Requests whose duration was observed on the route, with that method."""
    return grown("platform_http_request_duration_seconds_count", route=route, method=method)


def scrape(client: APIClient | None = None, **extra: Any) -> dict[str, float]:
    """GET /metrics as Prometheus would: sample name and labels to value."""
    response = (client or APIClient()).get("/metrics", **extra)
    assert response.status_code == 200, response.content
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            values[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return values


def create_event(client: APIClient, body: dict[str, Any] = EVENT, **extra: Any) -> Any:
    return client.post(EVENTS_URL, body, format="json", **extra)


# --- events and requests counted through the API ------------------------------------------


@pytest.mark.django_db
def test_an_event_created_counts_the_event_the_request_and_its_duration(
    runtime_client, since, django_capture_on_commit_callbacks
):
    client = runtime_client()
    grown = since()
    with django_capture_on_commit_callbacks(execute=True):
        response = create_event(client)
    assert response.status_code == 201, response.content

    assert grown("platform_events_total", outcome="created") == 1
    assert answered(grown, EVENTS_ROUTE, "POST", 201) == 1
    assert timed(grown, EVENTS_ROUTE, "POST") == 1
    # The time is counted too (its amount is no business of a test).
    assert (
        grown("platform_http_request_duration_seconds_sum", route=EVENTS_ROUTE, method="POST") > 0
    )


@pytest.mark.django_db
def test_an_idempotent_replay_counts_the_request_not_a_second_event(
    runtime_client, since, django_capture_on_commit_callbacks
):
    client = runtime_client()
    grown = since()
    with django_capture_on_commit_callbacks(execute=True):
        first = create_event(client, HTTP_IDEMPOTENCY_KEY="order-1")
        replay = create_event(client, HTTP_IDEMPOTENCY_KEY="order-1")
    assert (first.status_code, replay.status_code) == (201, 201)
    assert replay["Idempotent-Replayed"] == "true"
    assert Event.objects.count() == 1

    assert grown("platform_events_total", outcome="created") == 1
    assert answered(grown, EVENTS_ROUTE, "POST", 201) == 2


@pytest.mark.django_db(transaction=True)
def test_an_idempotent_replay_committed_for_real_counts_one_event(runtime_client, since):
    """The same, with real commits: the replay's INSERT was rolled back, and
    its on-commit count with it."""
    client = runtime_client()
    grown = since()
    for _ in range(3):
        assert create_event(client, HTTP_IDEMPOTENCY_KEY="order-2").status_code == 201
    assert Event.objects.count() == 1
    assert grown("platform_events_total", outcome="created") == 1


@pytest.mark.django_db
def test_a_refused_create_counts_no_event(
    runtime_client, since, django_capture_on_commit_callbacks
):
    client = runtime_client()
    grown = since()
    with django_capture_on_commit_callbacks(execute=True):
        response = create_event(client, {"type": "order.created", "payload": "not an object"})
    assert_error(response, 400, "InvalidPayload")
    assert grown("platform_events_total", outcome="created") == 0
    assert answered(grown, EVENTS_ROUTE, "POST", 400) == 1


@pytest.mark.django_db
def test_a_cancel_is_counted_once(runtime_client, since, django_capture_on_commit_callbacks):
    client = runtime_client()
    with django_capture_on_commit_callbacks(execute=True):
        created = create_event(client, {**EVENT, "schedule": {"delay": 60_000}})
    event_id = created.json()["event"]["id"]
    grown = since()

    # Counted once committed.
    with django_capture_on_commit_callbacks(execute=True):
        assert client.delete(f"{EVENTS_URL}/scheduled/{event_id}").status_code == 200
        # No longer scheduled: refused, and not counted again.
        assert_error(client.delete(f"{EVENTS_URL}/scheduled/{event_id}"), 400, "InvalidPayload")

    assert grown("platform_events_total", outcome="canceled") == 1
    assert grown("platform_events_total", outcome="created") == 0
    assert answered(grown, CANCEL_ROUTE, "DELETE", 200) == 1
    assert answered(grown, CANCEL_ROUTE, "DELETE", 400) == 1


@pytest.mark.django_db
def test_nothing_is_counted_with_metrics_off(runtime_client, since, settings):
    settings.METRICS_ENABLED = False
    client = runtime_client()
    grown = since()
    assert client.get(EVENTS_URL).status_code == 200
    assert answered(grown, EVENTS_ROUTE, "GET", 200) == 0
    assert metrics.live_listeners_by_workspace() == {}


# --- route, method and status labels ---------------------------------------------------------


@pytest.mark.django_db
def test_routes_are_labelled_by_their_template_not_their_path(runtime_client, since):
    client = runtime_client()
    grown = since()
    ids = ["evt_01J00000000000000000000001", "evt_01J00000000000000000000002"]
    for event_id in ids:
        assert_error(client.get(f"{EVENTS_URL}/{event_id}"), 404, "ResourceNotFound")

    assert answered(grown, EVENT_ROUTE, "GET", 404) == 2
    assert timed(grown, EVENT_ROUTE, "GET") == 2
    routes = {dict(labels).get("route", "") for _, labels in samples()}
    assert not [route for route in routes if any(event_id in route for event_id in ids)]


@pytest.mark.django_db
def test_an_unknown_method_is_labelled_other(since):
    grown = since()
    response = APIClient().generic("BREW", "/healthz")
    assert response.status_code == 405
    assert answered(grown, "/healthz", "other", 405) == 1
    methods = {dict(labels).get("method") for _, labels in samples()}
    assert "BREW" not in methods


@pytest.mark.django_db
def test_a_path_no_route_matches_is_labelled_unmatched(since):
    grown = since()
    assert_error(APIClient().get("/no/such/route/42"), 404, "ResourceNotFound")
    assert answered(grown, "unmatched", "GET", 404) == 1


# --- who may read /metrics --------------------------------------------------------------------


@pytest.fixture
def networks_cleared() -> Iterator[None]:
    """The allowed networks read afresh from this test's settings."""
    metrics_endpoint._allowed_networks.cache_clear()
    yield
    metrics_endpoint._allowed_networks.cache_clear()


@pytest.mark.django_db
def test_loopback_reads_the_metrics_as_prometheus_text(networks_cleared):
    client = APIClient()
    assert client.get("/healthz").status_code == 200
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    text = response.content.decode()
    for name in (
        "platform_http_requests_total",
        "platform_http_request_duration_seconds_bucket",
        "platform_events_due_unclaimed",
        "platform_events_due_unclaimed_oldest_seconds",
    ):
        assert f"\n{name}" in text, name
    assert client.head("/metrics").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("address", ["::1", "::ffff:127.0.0.1", "127.0.0.2"])
def test_other_loopback_forms_are_allowed(networks_cleared, address):
    assert APIClient(REMOTE_ADDR=address).get("/metrics").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("address", [ELSEWHERE, "::ffff:203.0.113.9", "2001:db8::1", "", "junk"])
def test_anyone_else_is_told_there_is_no_such_route(networks_cleared, address):
    body = assert_error(APIClient(REMOTE_ADDR=address).get("/metrics"), 404, "ResourceNotFound")
    assert "platform_" not in body["message"]
    # Nor does another method tell that it exists.
    assert_error(APIClient(REMOTE_ADDR=address).post("/metrics"), 404, "ResourceNotFound")


@pytest.mark.django_db
def test_the_bearer_token_opens_it_from_anywhere_and_a_wrong_one_is_401(networks_cleared, settings):
    settings.METRICS_BEARER_TOKEN = "s3cret-scraper-token"
    client = APIClient(REMOTE_ADDR=ELSEWHERE)
    for right in ("Bearer s3cret-scraper-token", "bearer s3cret-scraper-token"):
        assert client.get("/metrics", HTTP_AUTHORIZATION=right).status_code == 200, right
    for wrong in ("Bearer s3cret-scraper-tokeN", "Bearer "):
        refused = client.get("/metrics", HTTP_AUTHORIZATION=wrong)
        assert_error(refused, 401, "Unauthorized")
        assert refused["WWW-Authenticate"] == 'Bearer realm="metrics"'
    # Other schemes are not the metrics token: for them the page does not exist.
    for other in ("Basic czNjcmV0", "s3cret-scraper-token"):
        assert_error(client.get("/metrics", HTTP_AUTHORIZATION=other), 404, "ResourceNotFound")


@pytest.mark.django_db
def test_without_a_configured_token_no_token_opens_it(networks_cleared, settings):
    settings.METRICS_BEARER_TOKEN = ""
    client = APIClient(REMOTE_ADDR=ELSEWHERE)
    for header in ("Bearer ", "Bearer", "Bearer anything"):
        assert_error(client.get("/metrics", HTTP_AUTHORIZATION=header), 404, "ResourceNotFound")


@pytest.mark.django_db
def test_a_post_from_elsewhere_is_the_same_404_as_a_get(networks_cleared):
    # No CSRF page either: nothing tells that the route exists.
    refused = Client(REMOTE_ADDR=ELSEWHERE, enforce_csrf_checks=True).post("/metrics")
    assert_error(refused, 404, "ResourceNotFound")


@pytest.mark.django_db
def test_the_allowed_networks_are_settings(networks_cleared, settings):
    settings.METRICS_ALLOW_NETWORKS = ["203.0.113.0/24"]
    assert APIClient(REMOTE_ADDR=ELSEWHERE).get("/metrics").status_code == 200
    # Loopback is no longer among them.
    assert_error(APIClient().get("/metrics"), 404, "ResourceNotFound")


@pytest.mark.django_db
def test_only_get_and_head(networks_cleared):
    refused = APIClient().post("/metrics")
    assert_error(refused, 405, "MethodNotFound")
    assert refused["Allow"] == "GET, HEAD"
    assert_error(APIClient().delete("/metrics"), 405, "MethodNotFound")


@pytest.mark.django_db
def test_metrics_off_is_404_even_to_loopback(networks_cleared, settings):
    settings.METRICS_ENABLED = False
    settings.METRICS_BEARER_TOKEN = "s3cret-scraper-token"
    assert_error(APIClient().get("/metrics"), 404, "ResourceNotFound")
    assert_error(
        APIClient().get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scraper-token"),
        404,
        "ResourceNotFound",
    )


# --- the delivery backlog, read from the events table ------------------------------------


def ago(seconds: float) -> datetime:
    return timezone.now() - timedelta(seconds=seconds)


@pytest.fixture
def hooked_bot(bot: Bot) -> Bot:
    """A bot with a webhook (never called here): a claim leases its events
    rather than ending them ignored."""
    bot.webhook_url = "http://bot.invalid/hook"
    bot.save(update_fields=["webhook_url"])
    return bot


@pytest.mark.django_db
def test_the_backlog_counts_what_is_due_and_unclaimed(hooked_bot):
    assert scrape()["platform_events_due_unclaimed"] == 0
    assert scrape()["platform_events_due_unclaimed_oldest_seconds"] == 0

    for seconds in (30, 120, 5):
        EventFactory(bot=hooked_bot, status=EventStatus.SCHEDULED, due_at=ago(seconds))
    EventFactory(bot=hooked_bot, status=EventStatus.PENDING, due_at=ago(60))  # a retry
    # Not due yet, or done: not counted.
    EventFactory(bot=hooked_bot, status=EventStatus.SCHEDULED, due_at=ago(-3600))
    EventFactory(bot=hooked_bot, status=EventStatus.PENDING, due_at=ago(-60))
    for status in (EventStatus.PROCESSED, EventStatus.FAILED, EventStatus.CANCELED):
        EventFactory(bot=hooked_bot, status=status, due_at=ago(600))

    values = scrape()
    assert values["platform_events_due_unclaimed"] == 4
    assert values["platform_events_due_unclaimed_oldest_seconds"] >= 120


@pytest.mark.django_db
def test_the_backlog_is_counted_up_to_its_limit(hooked_bot, settings):
    settings.METRICS_BACKLOG_COUNT_LIMIT = 3
    for seconds in (30, 20, 10, 5, 1):
        EventFactory(bot=hooked_bot, status=EventStatus.SCHEDULED, due_at=ago(seconds))

    values = scrape()
    assert values["platform_events_due_unclaimed"] == 3
    # The oldest is the oldest of all, not of those counted.
    assert values["platform_events_due_unclaimed_oldest_seconds"] >= 30


@pytest.mark.django_db
def test_what_a_worker_claimed_leaves_the_backlog(hooked_bot, settings):
    settings.EVENT_LEASE_SECONDS = 60.0
    settings.EVENT_DELIVERY_TIMEOUT = 5.0
    for _ in range(3):
        EventFactory(bot=hooked_bot, status=EventStatus.SCHEDULED, due_at=ago(10))
    assert scrape()["platform_events_due_unclaimed"] == 3

    claimed = deliveries_claim(limit=10)
    assert len(claimed.deliveries) == 3
    values = scrape()
    assert values["platform_events_due_unclaimed"] == 0
    assert values["platform_events_due_unclaimed_oldest_seconds"] == 0


@pytest.mark.django_db
def test_events_created_through_the_api_are_in_the_backlog_until_claimed(runtime_client):
    client = runtime_client()
    for _ in range(2):
        assert create_event(client).status_code == 201
    assert create_event(client, {**EVENT, "schedule": {"delay": 3_600_000}}).status_code == 201
    assert scrape()["platform_events_due_unclaimed"] == 2


# --- rate limits ------------------------------------------------------------------------


@pytest.fixture
def limiter_in_use() -> Iterator[None]:
    """The limiter the settings name (memory, or Redis), built afresh."""
    rate_limit.limiter.cache_clear()
    yield
    rate_limit.limiter.cache_clear()


def limit_workspace(workspace: Workspace, per_minute: int) -> None:
    record = workspace_settings_get(workspace)
    record.rate_limit_per_minute = per_minute
    workspace_settings_update(record=record)


@pytest.mark.django_db
def test_a_refusal_is_counted_by_the_limit_that_ran_out(bot, since, limiter_in_use):
    limit_workspace(bot.workspace, 2)
    client = runtime_api(member_token(bot.workspace), bot.id)
    grown = since()
    answers = [client.get(EVENTS_URL).status_code for _ in range(4)]
    assert answers == [200, 200, 429, 429]
    assert grown("platform_rate_limit_rejections_total", limit="workspace") == 2
    assert grown("platform_rate_limit_rejections_total", limit="token") == 0
    assert answered(grown, EVENTS_ROUTE, "GET", 429) == 2


@pytest.mark.django_db
def test_a_token_refusal_is_counted_as_the_token_limit(bot, since, limiter_in_use):
    token = member_token(bot.workspace)
    AccessToken.objects.update(rate_limit_per_minute=1)
    client = runtime_api(token, bot.id)
    grown = since()
    assert [client.get(EVENTS_URL).status_code for _ in range(2)] == [200, 429]
    assert grown("platform_rate_limit_rejections_total", limit="token") == 1
    assert grown("platform_rate_limit_rejections_total", limit="workspace") == 0


@pytest.mark.django_db
def test_requests_allowed_count_no_refusal(bot, since, limiter_in_use):
    client = runtime_api(member_token(bot.workspace), bot.id)
    grown = since()
    for _ in range(3):
        assert client.get(EVENTS_URL).status_code == 200
    assert grown("platform_rate_limit_rejections_total", limit="workspace") == 0
    assert grown("platform_rate_limit_rejections_total", limit="token") == 0


# --- indexing -----------------------------------------------------------------------------


def announced_and_uploaded(client: APIClient, key: str, data: bytes, content_type: str) -> File:
    body = {"key": key, "size": len(data), "contentType": content_type, "index": True}
    response = client.put("/v1/files", body, format="json")
    assert response.status_code == 200, response.content
    sent = upload(client, response.json()["file"]["uploadUrl"], data, content_type)
    assert sent.status_code == 200, sent.content
    return File.objects.get(id=response.json()["file"]["id"])


@pytest.mark.django_db
def test_indexing_runs_are_counted_by_outcome_and_timed(runtime_client, file_storage, since):
    client = runtime_client()
    good = announced_and_uploaded(client, "guide.md", b"# Guide\n\nHello.\n", "text/markdown")
    bad = announced_and_uploaded(client, "broken.pdf", garbage_pdf(), "application/pdf")
    grown = since()

    assert file_index(file_id=good.id, revision=good.revision) == IndexingOutcome.COMPLETED
    assert file_index(file_id=bad.id, revision=bad.revision) == IndexingOutcome.FAILED
    assert File.objects.get(id=bad.id).status == FileStatus.INDEXING_FAILED
    # A run of a revision that is not the file's does nothing, and counts nothing.
    assert file_index(file_id=good.id, revision=good.revision + 1) == IndexingOutcome.SKIPPED

    assert grown("platform_files_indexed_total", outcome="indexing_completed") == 1
    assert grown("platform_files_indexed_total", outcome="indexing_failed") == 1
    assert grown("platform_file_indexing_duration_seconds_count") == 2


@pytest.mark.django_db
def test_a_file_given_up_by_housekeeping_counts_as_failed(
    runtime_client, file_storage, since, settings, django_capture_on_commit_callbacks
):
    settings.FILE_INDEXING_MAX_ATTEMPTS = 2
    file = announced_and_uploaded(runtime_client(), "lost.txt", b"words", "text/plain")
    File.objects.filter(id=file.id).update(indexing_due_at=ago(1), indexing_attempts=2)
    grown = since()
    # Counted once the failure is committed.
    with django_capture_on_commit_callbacks(execute=True):
        assert files_requeue_stalled() == []
    assert File.objects.get(id=file.id).status == FileStatus.INDEXING_FAILED
    assert grown("platform_files_indexed_total", outcome="indexing_failed") == 1


# --- delivery -----------------------------------------------------------------------------


@pytest.fixture
def start_engine(settings: Any) -> Iterator[Callable[[], EngineThread]]:
    """The delivery engine on threads of this process, as in a worker."""
    settings.EVENT_LEASE_SECONDS = 30.0
    settings.EVENT_DELIVERY_TIMEOUT = 5.0
    # A failed attempt's retry waits a minute: the test brings it forward.
    settings.EVENT_RETRY_BASE_SECONDS = 60.0
    started: list[EngineThread] = []

    def start() -> EngineThread:
        thread = EngineThread(
            EngineConfig(concurrency=20, per_bot=10, batch=100, interval=0.1, report_interval=3600)
        )
        thread.start()
        assert thread.ready.wait(10)
        started.append(thread)
        return thread

    yield start
    for thread in started:
        thread.stop(0.0)


def due_now(bot: Bot, count: int) -> list[str]:
    return [event_record(bot_id=bot.id, type="t", payload={"n": n}).id for n in range(count)]


def statuses(ids: list[str]) -> Counter[str]:
    return Counter(Event.objects.filter(id__in=ids).values_list("status", flat=True))


@pytest.mark.django_db(transaction=True)
def test_deliveries_are_counted_by_outcome_and_timed(receiver: Receiver, start_engine, since):
    answering = BotFactory(webhook_url=receiver.url_for("/ok"))
    failing = BotFactory(webhook_url=receiver.url_for("/down", Answer(status=503)))
    refusing = BotFactory(webhook_url=receiver.url_for("/gone", Answer(status=410)))
    silent = BotFactory()  # no webhook: its events end ignored
    grown = since()
    delivered, retried = due_now(answering, 4), due_now(failing, 2)
    failed, ignored = due_now(refusing, 3), due_now(silent, 2)
    engine = start_engine()

    expected = {"delivered": 4, "retried": 2, "failed": 3, "ignored": 2}

    def outcomes() -> dict[str, float]:
        return {outcome: grown("platform_events_total", outcome=outcome) for outcome in expected}

    wait_until(lambda: outcomes() == expected, message=lambda: f"counted {outcomes()}")
    assert statuses(delivered) == Counter(processed=4)
    assert statuses(retried) == Counter(pending=2)
    assert statuses(failed) == Counter(failed=3)
    assert statuses(ignored) == Counter(ignored=2)
    assert grown("platform_events_total", outcome="created") == 11
    # Every attempt is timed; the first attempt of each also counts its lateness.
    assert grown("platform_event_delivery_duration_seconds_count") == 9
    assert grown("platform_event_delivery_lateness_seconds_count") == 9
    assert grown("platform_event_claim_lag_seconds_count") == 9

    # The retries, brought forward: second attempts, not late first ones.
    Event.objects.filter(id__in=retried).update(next_attempt_at=ago(1))
    engine.wake()
    wait_until(
        lambda: grown("platform_events_total", outcome="retried") == 4,
        message=lambda: f"counted {outcomes()}",
    )
    assert grown("platform_event_delivery_duration_seconds_count") == 11
    assert grown("platform_event_delivery_lateness_seconds_count") == 9
    assert grown("platform_event_claim_lag_seconds_count") == 11
    assert grown("platform_events_total", outcome="delivered") == 4


# --- live listeners -------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_open_live_streams_are_counted_by_workspace(settings, bot):
    settings.LIVE_STREAM_REDIS_URL = ""  # the in-process bus
    connection = ChatConnectionFactory(bot=bot)
    alice = UserFactory(bot=bot, chat_id="alice")
    conversation = ConversationFactory(bot=bot, chat_id="room-1", owner=alice)
    ParticipantFactory(conversation=conversation, user=alice)
    other_workspace_bot = BotFactory()
    workspace = bot.workspace_id
    path = f"/chat/{connection.webhook_id}/conversations/room-1/listen"
    assert metrics.live_listeners_by_workspace().get(workspace, 0) == 0

    server = ServerLoop()
    try:
        exchanges = []
        for count in (1, 2):
            exchange = Exchange(server, path, headers={"x-user-key": user_key(connection, alice)})
            assert exchange.start()[0] == 200
            exchange.chunk()  # the first ping: the stream is open
            exchanges.append(exchange)
            assert metrics.live_listeners_by_workspace().get(workspace) == count
        assert other_workspace_bot.workspace_id not in metrics.live_listeners_by_workspace()

        for left, exchange in enumerate(reversed(exchanges)):
            exchange.hang_up()
            assert metrics.live_listeners_by_workspace().get(workspace, 0) == 1 - left
    finally:
        server.close()


# --- the metrics folder ---------------------------------------------------------------------

ENDED_PROCESS = """
from platform_site.observability import metrics
metrics.http_request_observe(route="/ended", method="GET", status=200, seconds=0.01)
metrics.live_listener_change(workspace_id="wkspace_ended", change=1)
import os
print(os.getpid())
"""


def test_the_files_of_a_process_that_ended_are_folded_and_keep_counting():
    import os
    import subprocess
    import sys
    from pathlib import Path

    folder = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    before = host_registry().get_sample_value(
        "platform_http_requests_total", {"route": "/ended", "method": "GET", "status": "200"}
    )
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", ENDED_PROCESS],
            capture_output=True,
            text=True,
            check=True,
        )
        pid = done.stdout.strip().splitlines()[-1]
        assert (folder / f"counter_{pid}.db").exists()
    registry = host_registry()
    counted = registry.get_sample_value(
        "platform_http_requests_total", {"route": "/ended", "method": "GET", "status": "200"}
    )
    assert counted == (before or 0) + 2
    # Folded into the archives and gone; the ended listeners not counted.
    assert not (folder / f"counter_{pid}.db").exists()
    assert not (folder / f"histogram_{pid}.db").exists()
    assert (folder / "counter_archive.db").exists()
    assert metrics.live_listeners_by_workspace().get("wkspace_ended", 0) == 0
    # Read again: the same, nothing counted twice.
    assert (
        host_registry().get_sample_value(
            "platform_http_requests_total", {"route": "/ended", "method": "GET", "status": "200"}
        )
        == counted
    )


def test_an_empty_file_of_a_process_that_died_making_it_is_removed_unread():
    import os
    import subprocess
    import sys
    from pathlib import Path

    # A pid no process holds: one that has just ended.
    pid = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    torn = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]) / f"counter_{pid}.db"
    torn.touch()
    before = host_registry().get_sample_value(
        "platform_http_requests_total", {"route": "/ended", "method": "GET", "status": "200"}
    )
    assert not torn.exists()
    assert before == host_registry().get_sample_value(
        "platform_http_requests_total", {"route": "/ended", "method": "GET", "status": "200"}
    )


@pytest.mark.django_db
def test_a_worker_host_serves_its_metrics_over_http():
    import urllib.request

    from platform_site.observability.metrics_files import host_metrics_serve
    from tests.servers import free_port

    port = free_port()
    server = host_metrics_serve(port=port, host="127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    assert "platform_events_total" in text


@pytest.mark.django_db
def test_a_scrape_without_its_database_still_answers_the_processes_metrics(monkeypatch):
    from django.db import OperationalError

    from events.metrics import Event as BacklogEvent

    def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("the database is not reachable")

    monkeypatch.setattr(BacklogEvent.objects, "filter", unreachable)
    response = APIClient().get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    assert "platform_http_requests_total" in text
    assert "platform_events_due_unclaimed" not in text


@pytest.mark.django_db
def test_a_request_forwarded_by_an_untrusted_proxy_is_not_taken_for_loopback(
    networks_cleared, settings
):
    # nginx on the same host, its forwarded headers not trusted (no
    # FORWARDED_ALLOW_IPS): every client would look like 127.0.0.1.
    settings.FORWARDED_ALLOW_IPS = ""
    client = APIClient(REMOTE_ADDR="127.0.0.1")
    for header in ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED"):
        assert_error(client.get("/metrics", **{header: "203.0.113.9"}), 404, "ResourceNotFound")
    settings.METRICS_BEARER_TOKEN = "s3cret-scraper-token"
    assert (
        client.get(
            "/metrics",
            HTTP_X_FORWARDED_FOR="203.0.113.9",
            HTTP_AUTHORIZATION="Bearer s3cret-scraper-token",
        ).status_code
        == 200
    )
    # A trusted proxy: uvicorn put the client's address in REMOTE_ADDR.
    settings.FORWARDED_ALLOW_IPS = "127.0.0.1"
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="127.0.0.1").status_code == 200
