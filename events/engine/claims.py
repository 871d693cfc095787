"""Claim due events for delivery. The table is the source of truth for what
is due: a worker process claims rows whose next attempt has come, with
SELECT … FOR UPDATE SKIP LOCKED, so processes claiming at once never claim
the same row, and gives each claim a lease: the row is due again when the
lease ends, should the process die with it.

A process claims when events fall due (it learns from each claim when the
next unclaimed one does, and sleeps until then), and only as many as it has
room for, leaving out the bots it holds enough of: what it claims it can
send before the lease ends. A claimed event is `pending` from then on, no
longer cancelable, and comes back ready to send: its body, its bot's webhook
URL and signing secrets, its workspace's timeout.

On PostgreSQL the claim and the loading of what it took are one statement
(an UPDATE of the rows a locking SELECT picked, returning what a request
needs); the ORM does the same in three elsewhere.

Other apps' rows fall due on the same clock (events/engine/clock_work.py:
chat's scheduled bot messages, states' expiry): a claim asked to look at
them first makes those due real, and the next due time it reports counts
them too. The engine asks a claim in a while (loop.py), not each one."""

import json
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from bots.models import DeliveryFormat
from bots.services.bots import BOT_USER_CHAT_ID_PREFIX
from events.engine.clock_work import clock_work_run
from events.engine.delivery import Delivery, lease_seconds, start_slack
from events.engine.formats import EventOnWire, RequestParts
from events.engine.leases import lease_duration, new_lease
from events.engine.webhook_client import WebhookRequest
from events.models import Event, EventStatus
from platform_site.api.fields import format_timestamp
from platform_site.foundation.secret_fields import secret_decrypt


@dataclass
class Claimed:
    """What one claim took, under one lease. Times are seconds since the epoch."""

    lease: int
    claimed_at: float
    event_ids: list[str] = field(default_factory=list)  # all it took, earliest due first
    deliveries: list[Delivery] = field(default_factory=list)  # those to send, in that order
    ignored: list[str] = field(default_factory=list)  # of bots without a webhook URL
    # When the next unclaimed event falls due (not looked for after a full
    # claim), or the next row of the clock's other work if the claim looked.
    next_due: float | None = None
    # Whether it looked at the clock's other work, and when that falls due next.
    looked_at_clock_work: bool = False
    clock_work_due: float | None = None


class _Row(NamedTuple):
    """What a claim answers for each event, on either path."""

    id: str
    bot_id: str
    due: float
    type: str
    payload: Any
    created_at: str
    conversation_id: str | None
    user_id: str | None
    message_id: str | None
    workflow_id: str | None
    attempt_count: int
    first_attempt_at: float | None
    webhook_url: str
    signing_secret: str
    previous_signing_secret: str  # "" unless it still signs (a rotation's overlap)
    webhook_timeout_seconds: float | None
    max_execution_time: int | None
    delivery_format: str


# The locked rows are updated through their id (a ctid names a row only
# within its partition): `e.id = ANY(…)` besides the join has each found by
# a primary-key lookup, where on the join alone the planner may hash it and
# scan every partition; the range of the ids lets PostgreSQL leave out, as
# the statement runs, the partitions that hold none (it prunes on a range
# of initplan values, not on an array).
_CLAIM_SQL = """
WITH due AS (
    SELECT id, next_attempt_at FROM events_event
    WHERE next_attempt_at <= %(now)s
      AND NOT (bot_id = ANY(string_to_array(%(excluded)s, ',')))
    ORDER BY next_attempt_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE events_event AS e
SET lease = %(lease)s, next_attempt_at = %(lease_end)s, status = 'pending', updated_at = %(now)s
FROM due, bots_bot AS b
    LEFT JOIN bots_workspacesettings AS s ON s.workspace_id = b.workspace_id
WHERE e.id = ANY(ARRAY(SELECT id FROM due)) AND e.id = due.id AND b.id = e.bot_id
    AND e.id BETWEEN (SELECT min(id) FROM due) AND (SELECT max(id) FROM due)
RETURNING e.id, e.bot_id, extract(epoch FROM due.next_attempt_at)::float8, e.type, e.payload,
    to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    e.conversation_id, e.user_id, e.message_id, e.workflow_id, e.attempt_count,
    extract(epoch FROM e.first_attempt_at)::float8, b.webhook_url, b.signing_secret,
    CASE WHEN b.previous_signing_secret_expires_at > %(now)s
        THEN b.previous_signing_secret ELSE '' END,
    s.webhook_timeout_seconds, b.max_execution_time, b.delivery_format
"""


def deliveries_claim(
    *, limit: int, exclude_bot_ids: Collection[str] = (), clock_work: bool = True
) -> Claimed:
    """Claim up to `limit` due events, earliest first, leaving out the bots of
    `exclude_bot_ids` (those the caller has no room for); those of a bot
    without a webhook URL end `ignored` at once. With `clock_work`, first
    make the other apps' due rows real."""
    now = timezone.now()
    # In transactions of their own, before the events are taken (those it
    # makes are claimed with the others): should one fail, the claim fails
    # with nothing claimed.
    clock_work_due = clock_work_run(now=now) if clock_work else None
    lease = new_lease()
    if connection.vendor == "postgresql":
        # The claim is one statement, atomic by itself; what follows is
        # fenced by its lease. Should it fail, the events wait for the lease
        # to end, as for a process that died holding them.
        claimed = _claimed_from(_claim_statement(now, lease, limit, exclude_bot_ids), lease, now)
    else:
        with transaction.atomic():
            claimed = _claimed_from(_claim_orm(now, lease, limit, exclude_bot_ids), lease, now)
    claimed.looked_at_clock_work = clock_work
    claimed.clock_work_due = clock_work_due
    if len(claimed.event_ids) < limit:  # a full claim is followed by another at once
        moments = (_next_due(now, exclude_bot_ids), claimed.clock_work_due)
        claimed.next_due = min((moment for moment in moments if moment is not None), default=None)
    return claimed


def _claimed_from(rows: list["_Row"], lease: int, now: datetime) -> Claimed:
    claimed = _claimed(rows, lease, now, _sdk_bots(rows))
    _lengthen_leases(claimed, now)
    if claimed.ignored:
        Event.objects.filter(id__in=claimed.ignored, lease=lease).update(
            status=EventStatus.IGNORED, next_attempt_at=None, updated_at=now
        )
    return claimed


def _claim_statement(
    now: datetime, lease: int, limit: int, excluded: Collection[str]
) -> list[_Row]:
    with connection.cursor() as cursor:
        cursor.execute(
            _CLAIM_SQL,
            {
                "now": now,
                "excluded": ",".join(excluded),
                "limit": limit,
                "lease": lease,
                "lease_end": now + lease_duration(),
            },
        )
        # The signing secrets come as stored, encrypted: a raw statement
        # does not go through their field, which decrypts on the ORM path.
        rows = [
            _Row(
                *(
                    *row[:4],
                    json.loads(row[4]),
                    *row[5:13],
                    secret_decrypt(row[13]),
                    secret_decrypt(row[14]),
                    *row[15:18],
                )
            )
            for row in cursor.fetchall()
        ]
    return sorted(rows, key=lambda row: row.due)


def _claim_orm(now: datetime, lease: int, limit: int, excluded: Collection[str]) -> list[_Row]:
    candidates = Event.objects.filter(next_attempt_at__lte=now)
    if excluded:
        candidates = candidates.exclude(bot_id__in=list(excluded))
    due = {
        event_id: when
        for event_id, when in candidates.order_by("next_attempt_at")
        .select_for_update(skip_locked=True)
        .values_list("id", "next_attempt_at")[:limit]
        if when is not None
    }
    if not due:
        return []
    claimed = Event.objects.filter(id__in=list(due))
    claimed.update(
        lease=lease,
        next_attempt_at=now + lease_duration(),
        status=EventStatus.PENDING,
        updated_at=now,
    )
    rows = []
    for row in claimed.values_list(
        "id",
        "bot_id",
        "type",
        "payload",
        "created_at",
        "conversation_id",
        "user_id",
        "message_id",
        "workflow_id",
        "attempt_count",
        "first_attempt_at",
        "bot__webhook_url",
        "bot__signing_secret",
        "bot__previous_signing_secret",
        "bot__previous_signing_secret_expires_at",
        "bot__workspace__settings__webhook_timeout_seconds",
        "bot__max_execution_time",
        "bot__delivery_format",
    ):
        (event_id, bot_id, type_, payload, created_at, *links, attempts, first) = row[:11]
        (url, secret, previous, previous_expires_at, timeout, *bot_fields) = row[11:]
        still_signs = previous_expires_at is not None and previous_expires_at > now
        rows.append(
            _Row(
                *(
                    event_id,
                    bot_id,
                    due[event_id].timestamp(),
                    type_,
                    payload,
                    format_timestamp(created_at),
                    *links,
                    attempts,
                    None if first is None else first.timestamp(),
                    url,
                    secret,
                    previous if still_signs else "",
                    timeout,
                    *bot_fields,
                )
            )
        )
    return sorted(rows, key=lambda row: row.due)


def _claimed(
    rows: Sequence[_Row],
    lease: int,
    now: datetime,
    sdk_bots: dict[str, tuple[Any, str | None]],
) -> Claimed:
    claimed_at = now.timestamp()
    claimed = Claimed(lease=lease, claimed_at=claimed_at)
    default_timeout = settings.EVENT_DELIVERY_TIMEOUT
    slack = _Slack()
    request_parts = RequestParts()
    for row in rows:
        claimed.event_ids.append(row.id)
        if not row.webhook_url:
            claimed.ignored.append(row.id)
            continue
        # The bot's own maxExecutionTime, else its workspace's timeout.
        timeout = float(row.max_execution_time or row.webhook_timeout_seconds or default_timeout)
        configuration, bot_user_id = sdk_bots.get(row.bot_id, (None, None))
        body, headers = request_parts(
            EventOnWire(
                event_id=row.id,
                bot_id=row.bot_id,
                type=row.type,
                created_at=row.created_at,
                payload=row.payload,
                conversation_id=row.conversation_id,
                user_id=row.user_id,
                message_id=row.message_id,
                workflow_id=row.workflow_id,
                delivery_format=row.delivery_format,
                configuration=configuration,
                bot_user_id=bot_user_id,
            )
        )
        previous = row.previous_signing_secret
        claimed.deliveries.append(
            Delivery(
                event_id=row.id,
                bot_id=row.bot_id,
                lease=lease,
                due=row.due,
                send_by=claimed_at + slack[timeout],
                request=WebhookRequest(
                    url=row.webhook_url,
                    message_id=row.id,
                    body=body,
                    secrets=(row.signing_secret, previous) if previous else (row.signing_secret,),
                    timeout=timeout,
                    headers=headers,
                ),
                attempt_count=row.attempt_count,
                first_attempt_at=row.first_attempt_at,
            )
        )
    return claimed


def _lengthen_leases(claimed: Claimed, now: datetime) -> None:
    """Claims of bots allowed longer than the deployment's lease leaves room
    for get a lease of their own (delivery.lease_seconds): one UPDATE per
    length, none in a claim of bots that wait the usual time."""
    longer: dict[float, list[str]] = defaultdict(list)
    for delivery in claimed.deliveries:
        seconds = lease_seconds(delivery.request.timeout)
        if seconds > settings.EVENT_LEASE_SECONDS:
            longer[seconds].append(delivery.event_id)
    for seconds, event_ids in longer.items():
        Event.objects.filter(id__in=event_ids, lease=claimed.lease).update(
            next_attempt_at=now + timedelta(seconds=seconds)
        )


def _sdk_bots(rows: list[_Row]) -> dict[str, tuple[Any, str | None]]:
    """The configuration (x-bp-configuration) and the user standing for the
    bot (x-bot-user-id) of each bot in `botpress` format among the rows: one
    statement for the claim, rather than a lookup in each row, written out
    as the claim is (the ORM's making of it cost more than the claim's own
    statement)."""
    bot_ids = list({row.bot_id for row in rows if row.delivery_format == DeliveryFormat.BOTPRESS})
    if not bot_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            _SDK_BOTS_SQL.format(ids=", ".join(["%s"] * len(bot_ids))),
            [BOT_USER_CHAT_ID_PREFIX, *bot_ids],
        )
        return {bot_id: (json.loads(data), user_id) for bot_id, data, user_id in cursor}


_SDK_BOTS_SQL = """
SELECT b.id, b.configuration, u.id FROM bots_bot AS b
    LEFT JOIN bots_user AS u ON u.bot_id = b.id AND u.chat_id = %s || b.id
WHERE b.id IN ({ids})
"""


class _Slack(dict[float, float]):
    """start_slack of each timeout, worked out once per claim."""

    def __missing__(self, timeout: float) -> float:
        self[timeout] = start_slack(timeout)
        return self[timeout]


_NEXT_DUE_SQL = """
SELECT extract(epoch FROM next_attempt_at)::float8 FROM events_event
WHERE next_attempt_at > %(now)s AND NOT (bot_id = ANY(string_to_array(%(excluded)s, ',')))
ORDER BY next_attempt_at
LIMIT 1
"""


def _next_due(now: datetime, excluded: Collection[str]) -> float | None:
    """When the next event not claimed yet falls due (or the next lease ends)."""
    if connection.vendor == "postgresql":
        # Written out as the claim is: the ORM's making of it cost more than
        # the lookup, after every claim of a steady stream.
        with connection.cursor() as cursor:
            cursor.execute(_NEXT_DUE_SQL, {"now": now, "excluded": ",".join(excluded)})
            row = cursor.fetchone()
        return None if row is None else float(row[0])
    upcoming = Event.objects.filter(next_attempt_at__gt=now)
    if excluded:
        upcoming = upcoming.exclude(bot_id__in=list(excluded))
    moment = upcoming.order_by("next_attempt_at").values_list("next_attempt_at", flat=True).first()
    return None if moment is None else moment.timestamp()
