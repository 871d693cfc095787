"""GET /v1/admin/bots/{id}/logs: the bot's delivery attempts as log lines,
newest first, filtered by time and level, in keyset pages."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bots.models import Role
from events.models import AttemptOutcome, DeliveryAttempt
from tests.conftest import assert_error
from tests.factories import BotFactory, EventFactory, WorkspaceFactory

pytestmark = pytest.mark.django_db

BASE = datetime(2026, 2, 1, 9, 0, tzinfo=UTC)
HOOK = "https://hooks.example.test/in"


def url(bot: Any) -> str:
    return f"/v1/admin/bots/{bot.id}/logs"


@pytest.fixture
def client(admin_client):
    return admin_client(Role.VIEWER)


def attempt(
    bot: Any,
    minute: int,
    outcome: str = AttemptOutcome.PROCESSED,
    *,
    event: Any = None,
    number: int = 1,
    status_code: int | None = 200,
    error: str = "",
    duration_ms: int = 35,
) -> DeliveryAttempt:
    return DeliveryAttempt.objects.create(
        event=event or EventFactory(bot=bot),
        bot=bot,
        number=number,
        started_at=BASE + timedelta(minutes=minute),
        duration_ms=duration_ms,
        url=HOOK,
        status_code=status_code,
        error=error,
        outcome=outcome,
    )


def logs(client: Any, bot: Any, **query: Any) -> dict[str, Any]:
    response = client.get(url(bot), query)
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) in ({"logs", "meta"}, {"logs", "meta", "nextToken"})
    return body


def minutes(body: dict[str, Any]) -> list[int]:
    return [
        int((datetime.fromisoformat(line["timestamp"]) - BASE).total_seconds() // 60)
        for line in body["logs"]
    ]


# --- shape ------------------------------------------------------------------------


def test_each_level_and_its_message(client, bot):
    event = EventFactory(bot=bot)
    attempt(bot, 0, AttemptOutcome.RETRY, event=event, number=1, status_code=503)
    attempt(
        bot, 1, AttemptOutcome.RETRY, event=event, number=2, status_code=None, error="timed out"
    )
    attempt(bot, 2, AttemptOutcome.PROCESSED, event=event, number=3, duration_ms=42)
    refused = EventFactory(bot=bot)
    attempt(bot, 3, AttemptOutcome.FAILED, event=refused, number=1, status_code=400)
    gave_up = EventFactory(bot=bot)
    attempt(
        bot,
        4,
        AttemptOutcome.FAILED,
        event=gave_up,
        number=3,
        status_code=None,
        error="connection refused",
    )
    body = logs(client, bot)
    assert body["meta"] == {} and "nextToken" not in body
    gave_up_line, refused_line, delivered, timed_out, unavailable = body["logs"]
    assert delivered == {
        "timestamp": "2026-02-01T09:02:00.000Z",
        "level": "info",
        "message": f"Delivered {event.id} (attempt 3): HTTP 200 in 42 ms",
        "eventId": event.id,
        "attempt": 3,
        "statusCode": 200,
        "durationMs": 42,
        "url": HOOK,
    }
    assert unavailable["level"] == "warn"
    assert unavailable["message"] == f"Attempt 1 at {event.id} failed, will retry: HTTP 503"
    assert timed_out["message"] == f"Attempt 2 at {event.id} failed, will retry: timed out"
    assert "statusCode" not in timed_out
    assert refused_line["level"] == "error"
    assert refused_line["message"] == f"{refused.id} failed after 1 attempt: HTTP 400"
    assert gave_up_line["message"] == f"{gave_up.id} failed after 3 attempts: connection refused"
    assert gave_up_line["eventId"] == gave_up.id


def test_only_this_bots_attempts(client, bot, workspace):
    attempt(bot, 0)
    attempt(BotFactory(workspace=workspace), 1)
    assert minutes(logs(client, bot)) == [0]


def test_a_bot_of_another_workspace_is_not_found(client):
    theirs = BotFactory(workspace=WorkspaceFactory())
    attempt(theirs, 0)
    assert_error(client.get(url(theirs)), 404, "ResourceNotFound")


def test_a_malformed_bot_id_is_invalid_identifier(client):
    assert_error(client.get("/v1/admin/bots/nope/logs"), 400, "InvalidIdentifier")


# --- order and pages ----------------------------------------------------------------


def test_newest_first_with_ties_broken_by_id(client, bot):
    for minute in (3, 1, 4, 1, 5, 9, 2, 6):
        attempt(bot, minute)
    body = logs(client, bot)
    assert minutes(body) == [9, 6, 5, 4, 3, 2, 1, 1]
    rows = DeliveryAttempt.objects.filter(started_at=BASE + timedelta(minutes=1))
    tied = sorted(rows.values_list("id", flat=True), reverse=True)
    assert [line["eventId"] for line in body["logs"][-2:]] == [
        DeliveryAttempt.objects.get(id=i).event_id for i in tied
    ]


def test_pages_carry_the_token_in_meta_and_at_the_top(client, bot):
    for minute in range(7):
        attempt(bot, minute)
    seen: list[int] = []
    query: dict[str, Any] = {"pageSize": 3}
    for _ in range(10):
        body = logs(client, bot, **query)
        seen += minutes(body)
        token = body["meta"].get("nextToken")
        if token is None:
            assert body["meta"] == {} and "nextToken" not in body
            break
        assert body["nextToken"] == token
        query = {"pageSize": 3, "nextToken": token}
    assert seen == [6, 5, 4, 3, 2, 1, 0]


def test_paging_with_ties_across_a_page_boundary(client, bot):
    for _ in range(5):
        attempt(bot, 0)
    first = logs(client, bot, pageSize=2)
    rest = logs(client, bot, pageSize=10, nextToken=first["nextToken"])
    seen = [line["eventId"] for line in first["logs"] + rest["logs"]]
    assert len(seen) == len(set(seen)) == 5


def test_a_token_of_another_filter_or_bot_is_invalid_query(client, bot, workspace):
    for minute in range(3):
        attempt(bot, minute)
    token = logs(client, bot, pageSize=1, level="info")["nextToken"]
    assert_error(client.get(url(bot), {"nextToken": token}), 400, "InvalidQuery")
    sibling = BotFactory(workspace=workspace)
    attempt(sibling, 0)
    query = {"nextToken": token, "level": "info"}
    assert_error(client.get(url(sibling), query), 400, "InvalidQuery")
    tampered = token[:-3] + ("AAA" if token[-3:] != "AAA" else "BBB")
    assert_error(client.get(url(bot), {"nextToken": tampered}), 400, "InvalidQuery")


def test_query_count(client, bot, django_assert_num_queries):
    for minute in range(5):
        attempt(bot, minute)
    logs(client, bot)  # the token's first use is recorded, once; its credentials kept
    # the bot, the attempts
    with django_assert_num_queries(2):
        assert len(logs(client, bot)["logs"]) == 5


# --- filters ----------------------------------------------------------------------


@pytest.fixture
def mixed(bot):
    attempt(bot, 0, AttemptOutcome.PROCESSED)
    attempt(bot, 10, AttemptOutcome.RETRY, status_code=503)
    attempt(bot, 20, AttemptOutcome.FAILED, status_code=410)
    attempt(bot, 30, AttemptOutcome.PROCESSED)
    return bot


@pytest.mark.parametrize(
    ("level", "expected"), [("info", [30, 0]), ("warn", [10]), ("error", [20])]
)
def test_level(client, mixed, level, expected):
    body = logs(client, mixed, level=level)
    assert minutes(body) == expected
    assert {line["level"] for line in body["logs"]} == {level}


def test_time_range_includes_both_ends(client, mixed):
    start, end = "2026-02-01T09:10:00.000Z", "2026-02-01T09:20:00Z"
    assert minutes(logs(client, mixed, timeStart=start, timeEnd=end)) == [20, 10]
    assert minutes(logs(client, mixed, timeStart=start)) == [30, 20, 10]
    assert minutes(logs(client, mixed, timeEnd="2026-02-01T10:09:59+01:00")) == [0]
    assert minutes(logs(client, mixed, timeStart=end, timeEnd=end, level="error")) == [20]


@pytest.mark.parametrize(
    "query",
    [
        {"timeStart": "yesterday"},
        {"timeStart": "2026-02-01T09:10:00"},
        {"timeEnd": "2026-13-01T00:00:00Z"},
        {"timeStart": "2026-02-01T10:00:00Z", "timeEnd": "2026-02-01T09:00:00Z"},
        {"level": "debug"},
        {"level": "INFO"},
        {"pageSize": "500"},
        {"nextToken": "garbage"},
    ],
)
def test_a_bad_query_is_invalid_query(client, mixed, query):
    assert_error(client.get(url(mixed), query), 400, "InvalidQuery")
