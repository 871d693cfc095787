"""The dashboard in headless Chromium, with a day of traffic in it: a
superuser logs in and lands on it; the charts are drawn, a failing bot's
last reason shows, and a screenshot of the whole page is saved as
docs/img/admin-dashboard.png (the one the documentation shows)."""

import math
import random
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import transaction
from django.utils import timezone

from bots.models import Bot
from events.models import AttemptOutcome, DeliveryAttempt, Event, EventStatus
from events.services.rollups import event_rollups_update, minute_floor
from files.models import FileStatus
from platform_site.foundation.ids import new_id_at
from tests.browser import Browser, browser, chromium  # noqa: F401
from tests.factories import AccountFactory, BotFactory, FileFactory, WorkspaceFactory
from tests.test_admin_browser import log_in

# The live server commits: the browser's requests run on their own thread.
pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "a-long-browser-password"
SCREENSHOT = Path(__file__).resolve().parent.parent / "docs" / "img" / "admin-dashboard.png"
SCREENSHOT_WIDTH = 1400
FAILING = {
    "Order Tracker": "HTTP 503: upstream orders service unavailable",
    "Weather Bot": "Connection refused",
}


def seed_traffic(bots: list[Bot], now, rng: random.Random) -> None:
    """A day of events, more by day than by night, each attempted; two bots fail often."""
    current = minute_floor(now)
    events, attempts, created_at = [], [], {}
    for minutes_ago in range(24 * 60, 0, -3):
        minute = current - timedelta(minutes=minutes_ago)
        wave = 3 + 2 * math.sin(2 * math.pi * minutes_ago / (24 * 60))
        burst = 6 if minutes_ago < 60 else 0
        for _ in range(rng.randint(0, round(wave + burst))):
            bot = rng.choice(bots)
            moment = minute + timedelta(seconds=rng.uniform(0, 170))
            event = Event(
                id=new_id_at("evt", moment),
                bot=bot,
                type="custom",
                status=EventStatus.PROCESSED,
                due_at=moment,
            )
            events.append(event)
            created_at[event.id] = moment
            started = moment + timedelta(seconds=rng.choice([0.02, 0.08, 0.3, 0.7, 1.5, 4]))
            fails = bot.name in FAILING and rng.random() < 0.4
            attempts.append(
                DeliveryAttempt(
                    event=event,
                    bot=bot,
                    number=1,
                    started_at=started,
                    duration_ms=rng.randint(5, 400),
                    url="https://bots.example.test/hook",
                    status_code=None if fails else 200,
                    error=FAILING[bot.name] if fails else "",
                    outcome=AttemptOutcome.RETRY if fails else AttemptOutcome.PROCESSED,
                )
            )
    with transaction.atomic():
        Event.objects.bulk_create(events)
        DeliveryAttempt.objects.bulk_create(attempts)
        for event_id, moment in created_at.items():
            Event.objects.filter(pk=event_id).update(created_at=moment)


def test_a_superuser_lands_on_the_dashboard(browser: Browser):  # noqa: F811
    rng = random.Random(16)
    now = timezone.now()
    support = WorkspaceFactory(name="Customer Support")
    shop = WorkspaceFactory(name="Web Shop")
    bots = [
        BotFactory(workspace=support, name="Support Desk"),
        BotFactory(workspace=support, name="Onboarding Guide"),
        BotFactory(workspace=shop, name="Order Tracker"),
        BotFactory(workspace=shop, name="Weather Bot"),
    ]
    seed_traffic(bots, now, rng)
    for status, count in (
        (FileStatus.INDEXING_COMPLETED, 14),
        (FileStatus.INDEXING_FAILED, 2),
        (FileStatus.INDEXING_PENDING, 3),
        (FileStatus.UPLOAD_PENDING, 1),
    ):
        for _ in range(count):
            extra = {"indexing_due_at": now} if status == FileStatus.INDEXING_PENDING else {}
            FileFactory(bot=rng.choice(bots), status=status, **extra)
    event_rollups_update(now=now)
    superuser = AccountFactory(username="admin@example.test", is_staff=True, is_superuser=True)
    superuser.set_password(PASSWORD)
    superuser.save()

    log_in(browser, superuser, PASSWORD)

    assert "Django administration" not in browser.text
    assert len(browser.find_all("svg.dashboard-chart")) == 4
    assert browser.find_all("#dashboard-hour svg polyline")
    failing = browser.text
    for reason in FAILING.values():
        assert reason in failing
    assert "Order Tracker" in browser.find("#dashboard-failing-bots table").text
    assert "No events" not in browser.find("#dashboard").text

    # The whole page in one image: a viewport as wide as asked and as tall as the page.
    driver = browser.driver
    metrics = {"width": SCREENSHOT_WIDTH, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {**metrics, "height": 800})
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {**metrics, "height": height})
    SCREENSHOT.parent.mkdir(exist_ok=True)
    assert driver.save_screenshot(str(SCREENSHOT))
