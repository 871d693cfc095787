"""Deliver claimed events: load them, POST them to their bots at once, and
record every attempt with what it means for its event, in one transaction.

Every write is fenced by the lease the events were claimed with: a delivery
whose lease was taken over (its worker stalled past the lease) changes nothing
but the record of its own attempts."""

import json
import logging
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from bots.models import Bot, WorkspaceSettings
from events.backoff import next_attempt_time, parse_retry_after
from events.models import FAILURE_REASON_MAX_LENGTH, AttemptOutcome, DeliveryAttempt, Event
from events.models import EventStatus as Status
from events.presenters import delivery_json
from events.signing import bot_signing_secrets
from events.verdicts import Verdict, judge
from events.webhook_client import WebhookRequest, WebhookResult, post_all

logger = logging.getLogger(__name__)

LEASE_LOST = "lease lost"
# A delivery's requests must end, and its attempts be recorded, before a tick
# may claim its events again: when the lease has LOOKAHEAD seconds left, which
# is also the delivery task's hard time limit. Past it the delivery is killed
# unrecorded and its events are sent again. Recording a batch takes well under
# RECORD_SECONDS (the margin events.W001 asks of EVENT_DELIVERY_TIMEOUT too),
# so a workspace's timeout is capped to the room less that: 53 s under the
# default 60 s lease. A lease too short for that margin gives half its room to
# the requests; the floor keeps aiohttp from reading a timeout of 0 as none.
RECORD_SECONDS = 5.0
MIN_TIMEOUT_SECONDS = 0.1


def events_deliver(*, lease: int, event_ids: Sequence[str]) -> Counter[str]:
    """Deliver the events of `event_ids` that are still pending under `lease`;
    answers how many ended in each status (`pending` for those to retry)."""
    held = Event.objects.filter(id__in=event_ids, lease=lease)
    # Claimed ahead, a scheduled event stays cancelable until this moment.
    held.filter(status=Status.SCHEDULED).update(status=Status.PENDING, updated_at=timezone.now())
    events = list(held.filter(status=Status.PENDING).select_related("bot__workspace__settings"))
    tally: Counter[str] = Counter()
    if len(events) < len(event_ids):
        tally["skipped"] = len(event_ids) - len(events)
    unreachable = [event for event in events if not event.bot.webhook_url]
    if unreachable:
        tally[Status.IGNORED] += _ignore(lease, unreachable)
    events = [event for event in events if event.bot.webhook_url]
    if not events:
        return tally
    now = timezone.now()
    ceiling = timeout_ceiling()
    requests = [
        WebhookRequest(
            url=event.bot.webhook_url,
            message_id=event.id,
            body=json.dumps(delivery_json(event), separators=(",", ":"), ensure_ascii=False),
            secrets=bot_signing_secrets(event.bot, now=now),
            timeout=min(webhook_timeout(event.bot), ceiling),
        )
        for event in events
    ]
    results = post_all(requests)
    tally.update(_record(lease, events, results))
    return tally


def lease_room() -> float:
    """Seconds from a claim until a tick may claim the same events again."""
    return settings.EVENT_LEASE_SECONDS - settings.EVENT_DISPATCH_LOOKAHEAD


def timeout_ceiling() -> float:
    """The longest a delivery's request may wait for its answer under the lease."""
    room = lease_room()
    return max(room - RECORD_SECONDS, room / 2, MIN_TIMEOUT_SECONDS)


def webhook_timeout(bot: Bot) -> float:
    """The timeout the bot's workspace asks for (its settings loaded with the bot)."""
    try:
        return bot.workspace.settings.webhook_timeout_seconds
    except WorkspaceSettings.DoesNotExist:
        return settings.EVENT_DELIVERY_TIMEOUT


def _ignore(lease: int, events: list[Event]) -> int:
    return Event.objects.filter(
        id__in=[event.id for event in events], lease=lease, status=Status.PENDING
    ).update(status=Status.IGNORED, next_attempt_at=None, updated_at=timezone.now())


def _cut(reason: str) -> str:
    return reason if len(reason) <= FAILURE_REASON_MAX_LENGTH else reason[:1999] + "…"


@transaction.atomic
def _record(lease: int, events: list[Event], results: list[WebhookResult]) -> Counter[str]:
    now = timezone.now()
    tally: Counter[str] = Counter()
    attempts: list[DeliveryAttempt] = []
    processed: list[str] = []
    fenced = Event.objects.filter(lease=lease, status=Status.PENDING)
    for event, result in zip(events, results, strict=True):
        verdict = judge(result)
        number = event.attempt_count + 1
        first_attempt_at = event.first_attempt_at or result.started_at
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
        attempts.append(_attempt(event, number, result, outcome))
        if outcome == AttemptOutcome.PROCESSED:
            processed.append(event.id)
            continue
        status = Status.PENDING if outcome == AttemptOutcome.RETRY else Status.FAILED
        updated = fenced.filter(id=event.id).update(
            status=status,
            next_attempt_at=retry_at,
            failure_reason=None if retry_at else _cut(verdict.reason),
            # A retry waits unclaimed until the dispatcher claims it again, so
            # this delivery, should it run twice, cannot jump the backoff.
            lease=0 if retry_at else lease,
            attempt_count=number,
            first_attempt_at=first_attempt_at,
            updated_at=now,
        )
        tally[status if updated else LEASE_LOST] += 1
        logger.info(
            "%s to %s: attempt %d %s",
            event.id,
            event.bot_id,
            number,
            f"failed, retry at {retry_at.isoformat()}: {verdict.reason}"
            if retry_at
            else f"failed for good: {verdict.reason}",
        )
    if processed:
        updated = fenced.filter(id__in=processed).update(
            status=Status.PROCESSED,
            next_attempt_at=None,
            attempt_count=F("attempt_count") + 1,
            first_attempt_at=Coalesce(F("first_attempt_at"), Value(now)),
            updated_at=now,
        )
        tally[Status.PROCESSED] += updated
        tally[LEASE_LOST] += len(processed) - updated
    if tally[LEASE_LOST]:
        # Taken over by another worker, or deleted with their bot meanwhile:
        # the attempts of events that still exist are kept.
        logger.warning("%d deliveries ended after another worker took them", tally[LEASE_LOST])
        alive = set(
            Event.objects.filter(id__in=[a.event_id for a in attempts]).values_list("id", flat=True)
        )
        attempts = [a for a in attempts if a.event_id in alive]
    DeliveryAttempt.objects.bulk_create(attempts)
    return +tally


def _attempt(
    event: Event, number: int, result: WebhookResult, outcome: AttemptOutcome
) -> DeliveryAttempt:
    return DeliveryAttempt(
        event=event,
        bot_id=event.bot_id,
        number=number,
        started_at=result.started_at,
        duration_ms=result.duration_ms,
        url=event.bot.webhook_url,
        status_code=result.status_code,
        error=result.error[:500],
        response_excerpt=result.response_excerpt,
        outcome=outcome,
    )


def _gave_up(attempts: int, first_attempt_at: datetime, now: datetime, last: str) -> str:
    hours = (now - first_attempt_at).total_seconds() / 3600
    tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
    return f"Gave up after {tries} over {hours:.1f} h. Last attempt: {last}"
