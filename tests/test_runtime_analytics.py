"""POST /v1/chat/analytics (trackAnalytics): counts added per bot, name and
minute by one upsert that loses nothing to concurrent calls; its bounds; the
dashboard's Analytics figure, scoped like the others; the purge."""

from datetime import timedelta

import pytest
from django.utils import timezone

from bots.models import Role
from events.rollups.models import AnalyticsMinute
from events.services.analytics import analytics_track
from events.services.rollups import event_rollups_update, minute_floor
from platform_site.backoffice.dashboard.figures import dashboard_figures
from tests.concurrency import at_once
from tests.conftest import assert_error
from tests.conftest import runtime_api as runtime
from tests.factories import AccountFactory, BotFactory, MembershipFactory, member_token

pytestmark = pytest.mark.django_db

URL = "/v1/chat/analytics"
MINUTE = timedelta(minutes=1)


def track(client, **body):
    return client.post(URL, body, format="json")


def counts(bot) -> dict[str, int]:
    return dict(AnalyticsMinute.objects.filter(bot=bot).values_list("name", "count"))


def test_a_count_is_added_to_its_minute(runtime_client, bot):
    client = runtime_client()
    before = minute_floor(timezone.now())
    response = track(client, name="order.paid", count=2)
    assert (response.status_code, response.json()) == (200, {})
    assert track(client, name="order.paid", count=3).status_code == 200
    assert track(client, name="order.refunded", count=1).status_code == 200
    assert counts(bot) == {"order.paid": 5, "order.refunded": 1}
    row = AnalyticsMinute.objects.get(bot=bot, name="order.paid")
    assert row.workspace_id == bot.workspace_id
    assert before <= row.minute <= minute_floor(timezone.now())


def test_minutes_and_bots_are_counted_apart(bot):
    now = timezone.now()
    other = BotFactory(workspace=bot.workspace)
    analytics_track(bot=bot, name="n", count=1, now=now)
    analytics_track(bot=bot, name="n", count=2, now=now - MINUTE)
    analytics_track(bot=other, name="n", count=4, now=now)
    rows = AnalyticsMinute.objects.order_by("bot_id", "minute").values_list("bot_id", "count")
    assert sorted(rows) == sorted([(bot.id, 2), (bot.id, 1), (other.id, 4)])


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"name": "", "count": 1}, "name"),
        ({"name": "x" * 201, "count": 1}, "name"),
        ({"name": 5, "count": 1}, "name"),
        ({"count": 1}, "name"),
        ({"name": "n", "count": 0}, "count"),
        ({"name": "n", "count": -1}, "count"),
        ({"name": "n", "count": 1.5}, "count"),
        ({"name": "n", "count": "1"}, "count"),
        ({"name": "n", "count": True}, "count"),
        ({"name": "n", "count": 1_000_001}, "count"),
        ({"name": "n"}, "count"),
        ({"name": "n", "count": 1, "tags": {}}, "tags"),
    ],
)
def test_bounds(runtime_client, body, named):
    response = runtime_client().post(URL, body, format="json")
    assert named in assert_error(response, 400, "InvalidPayload")["message"]
    assert not AnalyticsMinute.objects.exists()


def test_the_largest_count_and_name(runtime_client, bot):
    assert track(runtime_client(), name="x" * 200, count=1_000_000).status_code == 200
    assert counts(bot) == {"x" * 200: 1_000_000}


@pytest.mark.parametrize("role", ["viewer", "billing"])
def test_viewer_and_billing_may_not(runtime_client, role):
    assert_error(track(runtime_client(role), name="n", count=1), 403, "Forbidden")
    assert not AnalyticsMinute.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_calls_lose_no_count():
    bot = BotFactory()
    token = member_token(bot.workspace)
    callers, calls = 8, 5

    def call() -> list[int]:
        client = runtime(token, bot.id)
        return [track(client, name="hits", count=1).status_code for _ in range(calls)]

    assert at_once(callers, call) == [[200] * calls] * callers
    total = sum(AnalyticsMinute.objects.filter(bot=bot).values_list("count", flat=True))
    assert total == callers * calls


def test_query_count_of_a_call(runtime_client, django_assert_num_queries):
    client = runtime_client()
    track(client, name="n", count=1)  # records the token's first use
    with django_assert_num_queries(1):
        assert track(client, name="n", count=1).status_code == 200


# --- the dashboard ------------------------------------------------------------------------


def test_the_dashboard_shows_the_top_names_of_the_viewers_workspaces(bot):
    now = minute_floor(timezone.now()) + timedelta(seconds=30)
    theirs = BotFactory(name="Theirs")
    bot.name = "Ours"
    bot.save(update_fields=["name"])
    analytics_track(bot=bot, name="paid", count=3, now=now - 10 * MINUTE)
    analytics_track(bot=bot, name="paid", count=4, now=now - 2 * MINUTE)
    analytics_track(bot=bot, name="refunded", count=1, now=now - MINUTE)
    analytics_track(bot=theirs, name="secret", count=50, now=now - MINUTE)
    # Older than the day, and the minute not over yet: not shown.
    analytics_track(bot=bot, name="old", count=99, now=now - timedelta(hours=25))
    analytics_track(bot=bot, name="now", count=99, now=now)

    def shown(workspace_ids):
        figures = dashboard_figures(workspace_ids=workspace_ids, now=now)
        return [(t.name, t.bot_name, t.count) for t in figures.analytics]

    assert shown([bot.workspace_id]) == [("paid", "Ours", 7), ("refunded", "Ours", 1)]
    assert shown(None) == [("secret", "Theirs", 50), ("paid", "Ours", 7), ("refunded", "Ours", 1)]
    assert shown([]) == []


def test_the_admin_home_page_draws_them(client, bot):
    account = AccountFactory(is_staff=True, is_superuser=False)
    MembershipFactory(workspace=bot.workspace, account=account, role=Role.ADMINISTRATOR)
    client.force_login(account)
    analytics_track(bot=bot, name="<b>paid</b>", count=3, now=timezone.now() - MINUTE)
    page = client.get("/admin/").content.decode()
    assert 'id="dashboard-analytics"' in page
    assert "&lt;b&gt;paid&lt;/b&gt;" in page and "<b>paid</b>" not in page


def test_the_dashboard_says_when_nothing_was_counted(client, bot):
    client.force_login(AccountFactory(is_staff=True, is_superuser=True))
    page = client.get("/admin/").content.decode()
    assert "No bot counted anything with trackAnalytics in the last day." in page


def test_old_minutes_are_purged_with_the_rollups(bot, settings):
    now = timezone.now()
    analytics_track(
        bot=bot,
        name="old",
        count=1,
        now=now - timedelta(hours=settings.DASHBOARD_ROLLUP_KEEP_HOURS + 1),
    )
    analytics_track(bot=bot, name="kept", count=1, now=now - MINUTE)
    run = event_rollups_update(now=now)
    assert run.purged == 1
    assert counts(bot) == {"kept": 1}
