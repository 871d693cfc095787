"""The Django admin's home page is a dashboard: per-minute rollups kept by
beat (counts, lateness buckets, failing bots; recomputed idempotently,
late rows picked up, old ones purged, a first run's backfill bounded), the
page for a superuser (the platform) and a scoped staff account (its
workspaces only), SVG charts that parse and escape, and a page that costs
the same queries with 1 event as with 300."""

import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from bots.models import Role
from events.models import AttemptOutcome, DeliveryAttempt, Event, EventStatus
from events.rollups.lateness import LATENESS_FIELDS, lateness_label, lateness_percentile
from events.rollups.models import BotFailureMinute, EventMinute
from events.services.rollups import event_rollups_update, minute_floor, recomputed_overlap
from events.tasks import roll_up_dashboard
from files.models import FileStatus
from platform_site.backoffice.dashboard import figures as dashboard_figures_module
from platform_site.backoffice.dashboard.charts import Bar, Series, bar_chart, line_chart
from platform_site.foundation.ids import new_id_at
from tests.factories import (
    AccountFactory,
    BotFactory,
    EventFactory,
    FileFactory,
    MembershipFactory,
    WorkspaceFactory,
)

pytestmark = pytest.mark.django_db

MINUTE = timedelta(minutes=1)
SECOND = timedelta(seconds=1)
HOUR = timedelta(hours=1)
SVG = re.compile(r"<svg [^>]*class=\"dashboard-chart\".*?</svg>", re.DOTALL)
# What the admin's home page costs: the session and its account, the recent
# actions (Django's), then the dashboard: the minutes, the failing bots'
# totals, their names and last reasons, the bots' analytics, files by status.
# A scoped account adds the workspaces it manages, and its model permissions
# (Django's app list reads them, from the account and from its groups).
SUPERUSER_QUERIES = 8
SCOPED_QUERIES = 11


def lateness(row):
    return [getattr(row, field) for field in LATENESS_FIELDS]


def event_at(bot, moment, *, due_at=None):
    """An event created at `moment`, as its id and created_at both say."""
    event = EventFactory(
        bot=bot,
        id=new_id_at("evt", moment),
        status=EventStatus.PROCESSED,
        due_at=due_at or moment,
    )
    Event.objects.filter(pk=event.pk).update(created_at=moment)
    return event


def attempt(event, started_at, outcome=AttemptOutcome.PROCESSED, *, number=1, **fields):
    fields.setdefault("status_code", 200 if outcome == AttemptOutcome.PROCESSED else None)
    return DeliveryAttempt.objects.create(
        event=event,
        bot=event.bot,
        number=number,
        started_at=started_at,
        duration_ms=5,
        url="https://bot.example.test/hook",
        outcome=outcome,
        **fields,
    )


@pytest.fixture
def now():
    # Half a minute into the current minute: the minute before is complete.
    return minute_floor(timezone.now()) + 30 * SECOND


# The rollups ----------------------------------------------------------------


def test_a_minute_counts_events_created_attempts_delivered_and_failed_and_lateness(bot, now):
    minute = minute_floor(now) - 5 * MINUTE
    quick = event_at(bot, minute + SECOND)
    attempt(quick, minute + SECOND + timedelta(milliseconds=30))
    retried = event_at(bot, minute + 10 * SECOND)
    attempt(retried, minute + 13 * SECOND, AttemptOutcome.RETRY, status_code=503)
    attempt(retried, minute + 40 * SECOND, number=2)
    # Created the minute before, first attempted in this one, 110 s late.
    older = event_at(bot, minute - 60 * SECOND)
    attempt(older, minute + 50 * SECOND, AttemptOutcome.FAILED, error="Connection refused")
    elsewhere = BotFactory()
    attempt(event_at(elsewhere, minute + 5 * SECOND), minute + 6 * SECOND)

    event_rollups_update(now=now)

    row = EventMinute.objects.get(workspace=bot.workspace, minute=minute)
    assert (row.created, row.delivered, row.failed) == (2, 2, 2)
    # 30 ms, 3 s and 110 s: the second attempt of `retried` has no lateness.
    assert lateness(row) == [1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0]
    before = EventMinute.objects.get(workspace=bot.workspace, minute=minute - MINUTE)
    assert (before.created, before.delivered, before.failed) == (1, 0, 0)
    other = EventMinute.objects.get(workspace=elsewhere.workspace, minute=minute)
    assert (other.created, other.delivered, other.failed) == (1, 1, 0)
    assert EventMinute.objects.count() == 3

    failures = BotFailureMinute.objects.get()
    assert (failures.bot, failures.workspace, failures.minute) == (bot, bot.workspace, minute)
    assert failures.failed == 2
    # The last failure recorded; an answer is told by its status and excerpt.
    assert failures.last_failure_reason == "Connection refused"
    assert failures.last_failure_at == minute + 50 * SECOND


def test_a_failure_reason_is_the_answer_when_there_was_one(bot, now):
    minute = minute_floor(now) - MINUTE
    attempt(
        event_at(bot, minute),
        minute + SECOND,
        AttemptOutcome.RETRY,
        status_code=502,
        response_excerpt="  upstream\n  gone " + "x" * 400,
    )
    event_rollups_update(now=now)
    reason = BotFailureMinute.objects.get().last_failure_reason
    assert reason.startswith("HTTP 502: upstream gone xxx")
    assert len(reason) == 300 and reason.endswith("…")


def test_rolling_up_again_changes_nothing(bot, now):
    minute = minute_floor(now) - 3 * MINUTE
    for second in range(0, 60, 7):
        event = event_at(bot, minute + second * SECOND)
        attempt(event, minute + (second + 1) * SECOND, AttemptOutcome.RETRY, error="timed out")

    def stored():
        minutes = EventMinute.objects.order_by("minute").values()
        failures = BotFailureMinute.objects.order_by("minute").values()
        return [{k: v for k, v in row.items() if k != "id"} for row in [*minutes, *failures]]

    event_rollups_update(now=now)
    first = stored()
    assert first
    event_rollups_update(now=now)
    event_rollups_update(now=now + 20 * SECOND)
    assert stored() == first


def test_rows_committed_late_are_counted_by_the_next_run(bot, now):
    current = minute_floor(now)
    event_rollups_update(now=now)
    attempt(event_at(bot, current), current + SECOND)
    event_rollups_update(now=now)
    # Recorded after that run, started two minutes before the latest rollup.
    attempt(event_at(bot, current - 2 * MINUTE), current - 2 * MINUTE + SECOND)
    # Too late: before the minutes a run recomputes.
    attempt(event_at(bot, current - 10 * MINUTE), current - 10 * MINUTE + SECOND)

    event_rollups_update(now=now + MINUTE)

    counted = dict(EventMinute.objects.values_list("minute", "delivered"))
    assert counted == {current: 1, current - 2 * MINUTE: 1}


def test_a_minute_that_lost_its_rows_loses_its_rollup(bot, now):
    minute = minute_floor(now) - MINUTE
    event = event_at(bot, minute)
    attempt(event, minute + SECOND, AttemptOutcome.FAILED, error="refused")
    event_rollups_update(now=now)
    assert EventMinute.objects.exists() and BotFailureMinute.objects.exists()
    event.delete()
    event_rollups_update(now=now)
    assert not EventMinute.objects.exists()
    assert not BotFailureMinute.objects.exists()


def test_rollups_older_than_the_keep_hours_are_purged(bot, settings, now):
    workspace = bot.workspace
    old = minute_floor(now - (settings.DASHBOARD_ROLLUP_KEEP_HOURS + 1) * HOUR)
    kept = minute_floor(now - (settings.DASHBOARD_ROLLUP_KEEP_HOURS - 1) * HOUR)
    for minute in (old, kept):
        EventMinute.objects.create(workspace=workspace, minute=minute, created=1)
        BotFailureMinute.objects.create(
            bot=bot,
            workspace=workspace,
            minute=minute,
            failed=1,
            last_failure_reason="x",
            last_failure_at=minute,
        )

    run = event_rollups_update(now=now)

    assert run.purged == 2
    assert list(EventMinute.objects.values_list("minute", flat=True)) == [kept]
    assert list(BotFailureMinute.objects.values_list("minute", flat=True)) == [kept]


def test_a_first_run_looks_back_the_backfill_hours_only(bot, settings, now):
    settings.DASHBOARD_ROLLUP_BACKFILL_HOURS = 2
    current = minute_floor(now)
    for hours_ago in (3, 1):
        moment = current - hours_ago * HOUR
        attempt(event_at(bot, moment), moment + SECOND)

    run = event_rollups_update(now=now)

    assert run.start == current - 2 * HOUR
    assert list(EventMinute.objects.values_list("minute", flat=True)) == [current - HOUR]
    # The next run starts from the latest minute (less what may still be
    # recorded late: a lease and a margin), not from the backfill.
    assert event_rollups_update(now=now).start == current - HOUR - recomputed_overlap()


def test_a_backfill_is_written_an_hour_at_a_time(bot, settings, now):
    settings.DASHBOARD_ROLLUP_BACKFILL_HOURS = 3
    current = minute_floor(now)
    moments = [current - 150 * MINUTE, current - 61 * MINUTE, current - 60 * MINUTE, current]
    for moment in moments:
        attempt(event_at(bot, moment), moment + SECOND)

    with CaptureQueriesContext(connection) as queries:
        run = event_rollups_update(now=now)

    # Every minute counted once, whichever hour it fell in.
    rows = EventMinute.objects.order_by("minute")
    assert [(row.minute, row.created) for row in rows] == [(moment, 1) for moment in moments]
    assert run.minutes == len(moments)
    # Three hours and a minute: four transactions of their own (savepoints
    # here, in the test's transaction), and the purge's.
    opened = [q for q in queries.captured_queries if q["sql"].startswith("SAVEPOINT")]
    assert len(opened) == 5


def test_the_rollup_runs_on_beat_through_celery(settings, bot, now):
    entry = settings.CELERY_BEAT_SCHEDULE["roll-up-dashboard"]
    assert entry == {
        "task": roll_up_dashboard.name,
        "schedule": settings.DASHBOARD_ROLLUP_INTERVAL,
        "options": {"expires": settings.DASHBOARD_ROLLUP_INTERVAL},
    }
    assert settings.DASHBOARD_ROLLUP_INTERVAL == 60.0
    minute = minute_floor(now) - MINUTE
    attempt(event_at(bot, minute), minute + SECOND)
    roll_up_dashboard.apply()
    assert EventMinute.objects.get(minute=minute).delivered == 1


def test_the_day_is_drawn_in_quarter_hours_and_the_hour_in_minutes(workspace):
    now = datetime(2030, 5, 6, 12, 7, 30, tzinfo=UTC)
    until = datetime(2030, 5, 6, 12, 7, tzinfo=UTC)
    for minute, created in (
        (until - 24 * HOUR - MINUTE, 100),  # before the day
        (until - 24 * HOUR + MINUTE, 5),  # in the day, before its first quarter hour
        (until - 24 * HOUR + 8 * MINUTE, 30),  # the first quarter hour: 12:15
        (until - 7 * MINUTE, 7),  # 12:00, in the last quarter hour (7 minutes ended)
        (until - MINUTE, 7),  # 12:06, the last minute ended
        (until, 1000),  # 12:07, not ended
    ):
        EventMinute.objects.create(workspace=workspace, minute=minute, created=created)

    figures = dashboard_figures_module.dashboard_figures(workspace_ids=None, now=now)

    day, hour = figures.day, figures.hour
    assert len(day.times) == 96
    assert day.times[0] == datetime(2030, 5, 5, 12, 15, tzinfo=UTC)
    assert day.times[-1] == datetime(2030, 5, 6, 12, 0, tzinfo=UTC)
    assert day.created[0] == 2.0
    assert day.created[-1] == 2.0
    assert day.totals["created"] == 5 + 30 + 7 + 7
    assert len(hour.times) == 60
    assert hour.times[-1] == until - MINUTE
    assert hour.created[-7:] == [7, 0, 0, 0, 0, 0, 7]
    assert hour.totals["created"] == 14


def test_percentiles_of_buckets_say_which_bound_holds_them():
    counts = [0] * len(LATENESS_FIELDS)
    assert lateness_label(lateness_percentile(counts, 0.5)) == "no first attempts"
    counts[2] = 98  # ≤ 250 ms
    counts[5] = 1  # ≤ 2.5 s
    counts[-1] = 1  # above 5 min
    assert lateness_label(lateness_percentile(counts, 0.5)) == "≤ 250 ms"
    assert lateness_label(lateness_percentile(counts, 0.99)) == "≤ 2.5 s"
    assert lateness_label(lateness_percentile(counts, 1.0)) == "> 5 min"


# The page ---------------------------------------------------------------------


@pytest.fixture
def platform(now):
    """Two workspaces, each with a bot that delivered and failed in the
    last hour, and files; the rollup run."""
    ours = WorkspaceFactory(name="Lighthouse Keepers")
    theirs = WorkspaceFactory(name="Foreign Harbour")
    minute = minute_floor(now) - 10 * MINUTE
    for workspace, bot_name, reason, events in (
        (ours, "Foghorn", "HTTP 503: the foghorn is down", 2),
        (theirs, "Not Yours", "HTTP 500: a secret of theirs", 7),
    ):
        bot = BotFactory(workspace=workspace, name=bot_name)
        for index in range(events):
            attempt(event_at(bot, minute + index * SECOND), minute + (index + 1) * SECOND)
        failing = event_at(bot, minute + 30 * SECOND)
        attempt(failing, minute + 31 * SECOND, AttemptOutcome.RETRY, status_code=503)
        attempt(failing, minute + 32 * SECOND, AttemptOutcome.FAILED, number=2, error=reason)
        FileFactory(bot=bot, status=FileStatus.INDEXING_COMPLETED)
        FileFactory(bot=bot, status=FileStatus.INDEXING_FAILED)
    event_rollups_update(now=now)
    return ours, theirs


@pytest.fixture
def superuser(client):
    account = AccountFactory(is_staff=True, is_superuser=True)
    client.force_login(account)
    return account


@pytest.fixture
def scoped(client, platform):
    """A staff account that administers the first workspace only."""
    ours, _ = platform
    account = AccountFactory(is_staff=True, is_superuser=False)
    MembershipFactory(workspace=ours, account=account, role=Role.ADMINISTRATOR)
    client.force_login(account)
    return account


def home(client):
    response = client.get("/admin/")
    assert response.status_code == 200
    return response


def test_the_admin_is_named_for_the_platform(client, superuser, settings):
    page = home(client).content.decode()
    assert "Django administration" not in page
    assert f">{settings.PLATFORM_NAME}<" in page
    assert f"<title>Dashboard | {settings.PLATFORM_NAME} admin</title>" in page


def test_a_superuser_sees_the_whole_platform(client, superuser, platform, monkeypatch):
    ours, theirs = platform
    monkeypatch.setattr(
        dashboard_figures_module,
        "live_listeners_by_workspace",
        lambda: {ours.id: 2, theirs.id: 5, "wkspace_gone": 1},
    )
    response = home(client)
    page = response.content.decode()
    figures = response.context["figures"]

    assert "The whole platform" in page
    assert figures.hour.totals == {"created": 11, "delivered": 9, "failed": 4}
    assert figures.day.totals == figures.hour.totals
    assert figures.live_listeners == 8
    assert [(bot.name, bot.failed) for bot in figures.failing_bots] == [
        ("Foghorn", 2),
        ("Not Yours", 2),
    ]
    for text in ("Foghorn", "the foghorn is down", "Not Yours", "a secret of theirs"):
        assert text in page
    assert dict(figures.indexing)[FileStatus.INDEXING_FAILED] == 2
    assert figures.hour_lateness.counted == 11
    assert figures.hour_lateness.p50 == "≤ 1 s"
    assert "≤ 1 s" in page
    assert len(SVG.findall(page)) == 4


def test_a_scoped_staff_account_sees_its_workspaces_only(client, scoped, platform, monkeypatch):
    ours, theirs = platform
    monkeypatch.setattr(
        dashboard_figures_module,
        "live_listeners_by_workspace",
        lambda: {ours.id: 2, theirs.id: 5},
    )
    response = home(client)
    page = response.content.decode()
    figures = response.context["figures"]

    assert "Your 1 workspace," in page
    assert figures.hour.totals == {"created": 3, "delivered": 2, "failed": 2}
    assert figures.live_listeners == 2
    assert [bot.name for bot in figures.failing_bots] == ["Foghorn"]
    assert dict(figures.indexing)[FileStatus.INDEXING_FAILED] == 1
    assert "the foghorn is down" in page
    bot_ids = set(theirs.bots.values_list("id", flat=True))
    for text in ("Not Yours", "a secret of theirs", theirs.name, theirs.id, *bot_ids):
        assert text not in page


def test_a_staff_account_that_manages_no_workspace_sees_nothing(client, platform, monkeypatch):
    ours, _ = platform
    monkeypatch.setattr(
        dashboard_figures_module, "live_listeners_by_workspace", lambda: {ours.id: 2}
    )
    client.force_login(AccountFactory(is_staff=True, is_superuser=False))
    page = home(client).content.decode()
    assert "No event was created and no delivery attempted in the last hour." in page
    assert "No failed delivery attempts in the last day." in page
    assert "No files." in page
    assert "Foghorn" not in page


def test_an_empty_platform_says_so(client, superuser):
    page = home(client).content.decode()
    assert "No event was created and no delivery attempted in the last hour." in page
    assert "No event was created and no delivery attempted in the last day." in page
    assert "No first attempts in the last day." in page
    assert "No failed delivery attempts in the last day." in page
    assert "No files." in page


def test_the_charts_are_well_formed_svg_and_escape_names_and_reasons(client, superuser, now):
    bot = BotFactory(name="<script>alert('bot')</script>")
    minute = minute_floor(now) - MINUTE
    attempt(
        event_at(bot, minute),
        minute + SECOND,
        AttemptOutcome.FAILED,
        error="<script>alert('reason')</script> & more",
    )
    FileFactory(bot=bot)
    event_rollups_update(now=now)
    page = home(client).content.decode()

    assert "<script>alert" not in page
    charts = [ET.fromstring(svg) for svg in SVG.findall(page)]
    assert len(charts) == 4
    texts = [
        "".join(element.itertext())
        for chart in charts
        for element in chart.iter()
        if element.tag.endswith(("}text", "}title"))
    ]
    assert "<script>alert('bot')</script>" in texts
    assert "<script>alert('bot')</script>: <script>alert('reason')</script> & more" in texts


def test_a_chart_stands_alone_with_axes_and_a_legend():
    start = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    times = [start + index * MINUTE for index in range(60)]
    svg = line_chart(
        title="A <b>chart</b>",
        times=times,
        series=[
            Series("created & more", [index % 7 for index in range(60)], "#417690"),
            Series("failed", [0] * 60, "#c62828", "2 3"),
        ],
        y_label="events per minute",
        label_every=timedelta(minutes=10),
        whole=True,
    )
    chart = ET.fromstring(svg)
    texts = [element.text for element in chart.iter() if element.tag.endswith("}text")]
    assert {"12:00", "12:50", "time (UTC)", "events per minute", "created & more"} <= set(texts)
    assert "12:55" not in texts
    assert {"0", "2", "4", "6"} <= set(texts)
    assert len([e for e in chart.iter() if e.tag.endswith("}polyline")]) == 2
    bars = ET.fromstring(bar_chart(title="t", bars=[Bar("a", 3), Bar("b" * 80, 1)], colour="red"))
    labels = [element.text for element in bars.iter() if element.tag.endswith("}text")]
    assert labels == ["a", "3", "b" * 31 + "…", "1"]


# Query counts -----------------------------------------------------------------


def traffic(bot, now, events):
    """`events` events over the last ten minutes, each delivered, the first failed once."""
    start = minute_floor(now) - 10 * MINUTE
    for index in range(events):
        moment = start + index * (10 * MINUTE) / events
        event = event_at(bot, moment)
        if index == 0:
            attempt(event, moment + SECOND, AttemptOutcome.RETRY, error="timed out")
        attempt(event, moment + 2 * SECOND, number=1 if index else 2)


def page_queries(client):
    home(client)  # once first, so that per-process caches are warm
    with CaptureQueriesContext(connection) as queries:
        home(client)
    return len(queries)


@pytest.mark.parametrize("superuser_page", [True, False], ids=["superuser", "scoped"])
def test_the_page_costs_the_same_queries_with_1_event_and_with_300(
    client, now, superuser_page, django_assert_num_queries
):
    account = AccountFactory(is_staff=True, is_superuser=superuser_page)
    bot = BotFactory()
    MembershipFactory(workspace=bot.workspace, account=account, role=Role.OWNER)
    client.force_login(account)
    expected = SUPERUSER_QUERIES if superuser_page else SCOPED_QUERIES

    traffic(bot, now, 1)
    event_rollups_update(now=now)
    assert page_queries(client) == expected
    assert home(client).context["figures"].hour.totals["created"] == 1

    traffic(bot, now, 299)
    traffic(BotFactory(), now, 50)
    # Anew: rows dated ten minutes back are older than what a run recomputes.
    EventMinute.objects.all().delete()
    event_rollups_update(now=now)
    with django_assert_num_queries(expected):
        response = home(client)
    created = 350 if superuser_page else 300
    assert response.context["figures"].hour.totals["created"] == created
