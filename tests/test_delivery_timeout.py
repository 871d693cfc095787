"""How long a delivery waits for a bot's answer: the bot's maxExecutionTime,
else its workspace's setting, else the deployment's default; and never so
long that it outlives the lease it was sent under."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from bots.models import Bot, Workspace, WorkspaceSettings
from events.engine.claims import deliveries_claim
from events.engine.delivery import lease_seconds, start_slack, timeout_ceiling
from events.models import AttemptOutcome, DeliveryAttempt, Event, EventStatus
from tests.delivering import deliver_claimed, deliver_due
from tests.factories import BotFactory, EventFactory, WorkspaceFactory
from tests.receiver import Answer, Receiver

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def engine_settings(settings):
    settings.EVENT_LEASE_SECONDS = 60.0
    settings.EVENT_DELIVERY_TIMEOUT = 5.0


def workspace_waiting(seconds: float) -> Workspace:
    workspace = WorkspaceFactory()
    WorkspaceSettings.objects.create(workspace=workspace, webhook_timeout_seconds=seconds)
    return workspace


def bot_of(workspace: Workspace, receiver: Receiver) -> Bot:
    return BotFactory(workspace=workspace, webhook_url=receiver.url)


def due(bot: Bot) -> Event:
    now = timezone.now()
    return EventFactory(bot=bot, due_at=now - timedelta(seconds=1))


def deliver_all_due() -> dict[str, int]:
    """Claim every due event and deliver them together, as one claim of a worker."""
    return deliver_due()


def only_attempt(event: Event) -> DeliveryAttempt:
    [attempt] = DeliveryAttempt.objects.filter(event=event)
    return attempt


def test_each_workspace_waits_as_long_as_its_settings_say(receiver):
    impatient = due(bot_of(workspace_waiting(0.5), receiver))
    patient = due(bot_of(workspace_waiting(5.0), receiver))
    receiver.answer(Answer(200, b"late", delay=1.5), Answer(200, b"late", delay=1.5))

    assert deliver_all_due() == {"pending": 1, "processed": 1}

    timed_out = only_attempt(impatient)
    assert timed_out.outcome == AttemptOutcome.RETRY
    assert timed_out.status_code is None
    assert timed_out.error == "No response within 0.5 s"
    answered = only_attempt(patient)
    assert answered.outcome == AttemptOutcome.PROCESSED
    assert (answered.status_code, answered.response_excerpt, answered.error) == (200, "late", "")
    assert Event.objects.get(id=patient.id).status == EventStatus.PROCESSED


def test_a_workspace_without_settings_waits_the_deployment_default(settings, receiver):
    settings.EVENT_DELIVERY_TIMEOUT = 0.5
    workspace = WorkspaceFactory()
    assert not WorkspaceSettings.objects.filter(workspace=workspace).exists()
    event = due(bot_of(workspace, receiver))
    receiver.answer(Answer(200, b"late", delay=1.5))

    assert deliver_all_due() == {"pending": 1}
    assert only_attempt(event).error == "No response within 0.5 s"


def test_a_bot_waits_its_own_max_execution_time_rather_than_its_workspace(receiver):
    bot = bot_of(workspace_waiting(5.0), receiver)
    bot.max_execution_time = 1
    bot.save(update_fields=["max_execution_time"])
    event = due(bot)
    receiver.answer(Answer(200, b"late", delay=1.5))

    assert deliver_all_due() == {"pending": 1}
    assert only_attempt(event).error == "No response within 1 s"


def test_a_timeout_longer_than_the_lease_allows_gets_a_lease_of_its_own(settings, receiver):
    # Another process may claim an event again a second after its claim;
    # this bot may take 30 s, so its claim lasts that and time to record it.
    settings.EVENT_LEASE_SECONDS = 1.0
    event = due(bot_of(workspace_waiting(30.0), receiver))
    receiver.answer(Answer(200, b"late", delay=2.0))

    before = timezone.now()
    claimed = deliveries_claim(limit=10)
    [delivery] = claimed.deliveries
    assert delivery.request.timeout == 30.0
    lease_end = Event.objects.get(id=event.id).next_attempt_at
    assert lease_end is not None
    assert lease_end - before >= timedelta(seconds=40)
    assert lease_end - timezone.now() <= timedelta(seconds=40)
    assert delivery.send_by - claimed.claimed_at == pytest.approx(5.0)
    assert deliveries_claim(limit=10).event_ids == []  # nobody takes it over meanwhile

    assert deliver_claimed(claimed) == {"processed": 1}
    assert only_attempt(event).status_code == 200


def test_lengthening_leases_takes_one_statement_and_only_when_needed(settings, receiver):
    def queries_to_claim() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert deliveries_claim(limit=10).deliveries
        return len(captured.captured_queries)

    due(bot_of(workspace_waiting(5.0), receiver))
    usual = queries_to_claim()
    settings.EVENT_LEASE_SECONDS = 1.0
    for seconds in (30.0, 30.0, 45.0):
        due(bot_of(workspace_waiting(seconds), receiver))
    assert queries_to_claim() == usual + 2  # one UPDATE per lease length


@pytest.mark.parametrize(
    ("lease", "ceiling", "slack"),
    [(60.0, 55.0, 2.5), (30.0, 25.0, 2.5), (8.0, 4.0, 2.0), (1.0, 0.5, 0.25), (0.2, 0.1, 0.05)],
)
def test_a_request_ends_before_another_process_may_claim_its_event_again(
    settings, lease, ceiling, slack
):
    settings.EVENT_LEASE_SECONDS = lease
    assert timeout_ceiling() == pytest.approx(ceiling)
    assert timeout_ceiling() < lease
    # A request with the longest timeout may wait this long to start, and one
    # with the default 10 s (where it fits) the rest of the lease less 5 s.
    assert start_slack(ceiling) == pytest.approx(slack)
    if lease > 15:
        assert start_slack(10.0) == pytest.approx(lease - 15)
    # Longer than that: a lease of its own, and as long to start as to record.
    assert lease_seconds(ceiling + 1) == pytest.approx(ceiling + 11)
    assert start_slack(ceiling + 1) == pytest.approx(5.0)


def test_delivering_events_of_many_workspaces_takes_no_query_per_event(receiver):
    def queries_to_deliver(events: list[Event]) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert deliver_all_due() == {"processed": len(events)}
        return len(captured.captured_queries)

    one = queries_to_deliver([due(bot_of(workspace_waiting(5.0), receiver))])

    workspaces = [workspace_waiting(4.0), workspace_waiting(6.0), WorkspaceFactory()]
    bots = [bot_of(workspace, receiver) for workspace in workspaces for _ in range(2)]
    many = [due(bot) for bot in bots for _ in range(2)]
    assert queries_to_deliver(many) == one
