"""A delivery's work in the database, in four short transactions the engine
(events/engine/) runs on its database thread: claimed events made ready to
send (body, secrets and timeout loaded), events claimed ahead started when
they fall due, outcomes recorded, and unsent claims released.

Every write is fenced by the lease its events were claimed with: a delivery
whose lease was taken over (its worker stalled past the lease) changes nothing
but the record of its own attempts."""

import json
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from events.backoff import next_attempt_time, parse_retry_after
from events.dispatch import Claim
from events.models import FAILURE_REASON_MAX_LENGTH, AttemptOutcome, DeliveryAttempt, Event
from events.models import EventStatus as Status
from events.presenters import delivery_json
from events.signing import signing_secrets
from events.verdicts import Verdict, judge
from events.webhook_client import WebhookRequest, WebhookResult

logger = logging.getLogger(__name__)

LEASE_LOST = "lease lost"
SKIPPED = "skipped"
# A delivery's request must end, and its attempt be recorded, before another
# process may claim its event again: when the lease has LOOKAHEAD seconds
# left. Recording takes well under RECORD_SECONDS (the margin events.W001
# asks of EVENT_DELIVERY_TIMEOUT too), so a workspace's timeout is capped to
# the room less that: 53 s under the default 60 s lease. A lease too short for
# that margin gives half its room to the request; the floor keeps a timeout
# of 0 from reading as none.
RECORD_SECONDS = 5.0
MIN_TIMEOUT_SECONDS = 0.1

_COLUMNS = (
    "id",
    "type",
    "payload",
    "created_at",
    "bot_id",
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
)


@dataclass(frozen=True, slots=True)
class Delivery:
    """A claimed event, ready to send."""

    event_id: str
    bot_id: str
    lease: int
    due: datetime  # when its attempt is due
    # The latest moment its request may start and still be answered and
    # recorded before another process may claim the event again.
    send_by: datetime
    url: str
    body: str
    secrets: tuple[str, ...]
    timeout: float
    attempt_count: int
    first_attempt_at: datetime | None
    started: bool  # already pending (it was due when claimed); else it starts at `due`

    def request(self) -> WebhookRequest:
        return WebhookRequest(
            url=self.url,
            message_id=self.event_id,
            body=self.body,
            secrets=self.secrets,
            timeout=self.timeout,
        )


@dataclass
class Batch:
    """Deliveries that go on, and how many events ended (or were left) on the way."""

    deliveries: list[Delivery] = field(default_factory=list)
    tally: Counter[str] = field(default_factory=Counter)


def deliveries_prepare(claim: Claim) -> Batch:
    """The claimed events still held under the claim's lease, ready to send.
    Those already due whose bot has no webhook URL end `ignored` now; the
    others go on (one due later without a URL is ignored when it starts)."""
    batch = Batch()
    if claim.lease == 0:  # no claim: lease 0 is what an unclaimed event holds
        batch.tally[SKIPPED] = len(claim.due)
        return batch
    if not claim.due:
        return batch
    due_at = dict(claim.due)
    rows = Event.objects.filter(
        id__in=claim.event_ids, lease=claim.lease, status__in=(Status.SCHEDULED, Status.PENDING)
    ).values(*_COLUMNS)
    room = lease_room()
    ceiling = timeout_ceiling()
    unreachable: list[str] = []
    for row in rows:
        due = due_at[row["id"]]
        started = due <= claim.claimed_at
        url = row["bot__webhook_url"]
        if started and not url:
            unreachable.append(row["id"])
            continue
        timeout = min(
            row["bot__workspace__settings__webhook_timeout_seconds"]
            or settings.EVENT_DELIVERY_TIMEOUT,
            ceiling,
        )
        batch.deliveries.append(
            Delivery(
                event_id=row["id"],
                bot_id=row["bot_id"],
                lease=claim.lease,
                due=due,
                send_by=max(due, claim.claimed_at) + timedelta(seconds=_slack(room, timeout)),
                url=url,
                body=json.dumps(delivery_json(row), separators=(",", ":"), ensure_ascii=False),
                secrets=signing_secrets(
                    row["bot__signing_secret"],
                    row["bot__previous_signing_secret"],
                    row["bot__previous_signing_secret_expires_at"],
                    now=claim.claimed_at,
                ),
                timeout=timeout,
                attempt_count=row["attempt_count"],
                first_attempt_at=row["first_attempt_at"],
                started=started,
            )
        )
    if unreachable:
        batch.tally[Status.IGNORED] += _ignore(claim.lease, unreachable)
    batch.tally[SKIPPED] += len(claim.due) - len(batch.deliveries) - len(unreachable)
    batch.tally = +batch.tally
    return batch


def deliveries_start(deliveries: Sequence[Delivery]) -> Batch:
    """Start deliveries claimed ahead that are now due: a scheduled event
    becomes pending (no longer cancelable), one whose bot has no webhook URL
    ends `ignored`. Answers those still held, to send now; one canceled
    since its claim, or taken over, is left out."""
    batch = Batch()
    for lease, group in _by_lease(deliveries).items():
        now = timezone.now()
        reachable = [d.event_id for d in group if d.url]
        unreachable = [d.event_id for d in group if not d.url]
        with transaction.atomic():
            held = Event.objects.filter(lease=lease)
            if unreachable:
                batch.tally[Status.IGNORED] += _ignore(lease, unreachable)
            held.filter(id__in=reachable, status=Status.SCHEDULED).update(
                status=Status.PENDING, updated_at=now
            )
            going = set(
                held.filter(id__in=reachable, status=Status.PENDING).values_list("id", flat=True)
            )
        batch.deliveries += [d for d in group if d.event_id in going]
        batch.tally[SKIPPED] += len(reachable) - len(going)
    batch.tally = +batch.tally
    return batch


def deliveries_release(deliveries: Sequence[Delivery]) -> int:
    """Give back claims that will not be sent (the process stops, or one
    waited past its `send_by`): each event is due again at its due time,
    for any process to claim. Answers how many were still held."""
    released = 0
    with transaction.atomic():
        now = timezone.now()
        for delivery in deliveries:
            released += Event.objects.filter(
                id=delivery.event_id,
                lease=delivery.lease,
                status__in=(Status.SCHEDULED, Status.PENDING),
            ).update(lease=0, next_attempt_at=delivery.due, updated_at=now)
    return released


@transaction.atomic
def deliveries_record(finished: Sequence[tuple[Delivery, WebhookResult]]) -> Counter[str]:
    """Record the attempts and what they mean for their events, in one
    transaction; answers how many events ended in each status (`pending`
    for those to retry, LEASE_LOST for those another process took over)."""
    now = timezone.now()
    tally: Counter[str] = Counter()
    attempts: list[DeliveryAttempt] = []
    processed: dict[int, list[str]] = defaultdict(list)
    for delivery, result in finished:
        verdict = judge(result)
        number = delivery.attempt_count + 1
        first_attempt_at = delivery.first_attempt_at or result.started_at
        retry_at = None
        if verdict.outcome == AttemptOutcome.RETRY:
            retry_at = next_attempt_time(
                attempt_number=number,
                first_attempt_at=first_attempt_at,
                now=now,
                retry_after=parse_retry_after(result.retry_after, now=now),
            )
        outcome = verdict.outcome
        if outcome == AttemptOutcome.RETRY and retry_at is None:
            outcome = AttemptOutcome.FAILED
            verdict = Verdict(outcome, _gave_up(number, first_attempt_at, now, verdict.reason))
        attempts.append(_attempt(delivery, number, result, outcome))
        if outcome == AttemptOutcome.PROCESSED:
            processed[delivery.lease].append(delivery.event_id)
            continue
        status = Status.PENDING if outcome == AttemptOutcome.RETRY else Status.FAILED
        updated = Event.objects.filter(
            id=delivery.event_id, lease=delivery.lease, status=Status.PENDING
        ).update(
            status=status,
            next_attempt_at=retry_at,
            failure_reason=None if retry_at else _cut(verdict.reason),
            # A retry waits unclaimed until a process claims it again, so
            # this delivery, should it be recorded twice, cannot jump the backoff.
            lease=0 if retry_at else delivery.lease,
            attempt_count=number,
            first_attempt_at=first_attempt_at,
            updated_at=now,
        )
        tally[status if updated else LEASE_LOST] += 1
        logger.info(
            "%s to %s: attempt %d %s",
            delivery.event_id,
            delivery.bot_id,
            number,
            f"failed, retry at {retry_at.isoformat()}: {verdict.reason}"
            if retry_at
            else f"failed for good: {verdict.reason}",
        )
    for lease, event_ids in processed.items():
        updated = Event.objects.filter(id__in=event_ids, lease=lease, status=Status.PENDING).update(
            status=Status.PROCESSED,
            next_attempt_at=None,
            attempt_count=F("attempt_count") + 1,
            first_attempt_at=Coalesce(F("first_attempt_at"), Value(now)),
            updated_at=now,
        )
        tally[Status.PROCESSED] += updated
        tally[LEASE_LOST] += len(event_ids) - updated
    if tally[LEASE_LOST]:
        # Taken over by another process, or deleted with their bot meanwhile:
        # the attempts of events that still exist are kept.
        logger.warning("%d deliveries ended after another process took them", tally[LEASE_LOST])
        alive = set(
            Event.objects.filter(id__in=[a.event_id for a in attempts]).values_list("id", flat=True)
        )
        attempts = [a for a in attempts if a.event_id in alive]
    DeliveryAttempt.objects.bulk_create(attempts)
    return +tally


def lease_room() -> float:
    """Seconds from a claim until another process may claim the same events again."""
    return settings.EVENT_LEASE_SECONDS - settings.EVENT_DISPATCH_LOOKAHEAD


def timeout_ceiling() -> float:
    """The longest a delivery's request may wait for its answer under the lease."""
    room = lease_room()
    return max(room - RECORD_SECONDS, room / 2, MIN_TIMEOUT_SECONDS)


def _slack(room: float, timeout: float) -> float:
    """Seconds a claimed delivery may wait to start, and still end (after its
    timeout) and be recorded (within RECORD_SECONDS, or half of what a short
    lease leaves) before another process may claim its event again."""
    margin = min(RECORD_SECONDS, (room - timeout) / 2)
    return max(0.0, room - timeout - margin)


def _by_lease(deliveries: Iterable[Delivery]) -> dict[int, list[Delivery]]:
    groups: dict[int, list[Delivery]] = defaultdict(list)
    for delivery in deliveries:
        groups[delivery.lease].append(delivery)
    return groups


def _ignore(lease: int, event_ids: list[str]) -> int:
    return Event.objects.filter(
        id__in=event_ids, lease=lease, status__in=(Status.SCHEDULED, Status.PENDING)
    ).update(status=Status.IGNORED, next_attempt_at=None, updated_at=timezone.now())


def _cut(reason: str) -> str:
    return reason if len(reason) <= FAILURE_REASON_MAX_LENGTH else reason[:1999] + "…"


def _attempt(
    delivery: Delivery, number: int, result: WebhookResult, outcome: AttemptOutcome
) -> DeliveryAttempt:
    return DeliveryAttempt(
        event_id=delivery.event_id,
        bot_id=delivery.bot_id,
        number=number,
        started_at=result.started_at,
        duration_ms=result.duration_ms,
        url=delivery.url,
        status_code=result.status_code,
        error=result.error[:500],
        response_excerpt=result.response_excerpt,
        outcome=outcome,
    )


def _gave_up(attempts: int, first_attempt_at: datetime, now: datetime, last: str) -> str:
    hours = (now - first_attempt_at).total_seconds() / 3600
    tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
    return f"Gave up after {tries} over {hours:.1f} h. Last attempt: {last}"
