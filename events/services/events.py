from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from bots.models import Bot, Conversation, IntegrationInstallation, Message, User, Workflow
from bots.selectors.references import (
    conversation_reference_get,
    message_reference_get,
    user_reference_get,
    workflow_reference_get,
)
from events.engine.wakeups import deliveries_wake
from events.models import Event, EventStatus
from events.selectors.events import event_get
from platform_site.foundation.domain_errors import InvalidValue, MissingReference
from platform_site.foundation.sql.row_insert import row_insert
from platform_site.observability import metrics


def due_time(*, schedule: dict[str, Any] | None, now: datetime) -> datetime:
    """When an event with `schedule` falls due: at `dateTime`, or `delay` ms from now."""
    if not schedule:
        return now
    if "dateTime" in schedule:
        moment: datetime = schedule["dateTime"]
        return moment
    try:
        return now + timedelta(milliseconds=schedule["delay"])
    except OverflowError:
        raise InvalidValue("schedule.delay: Too far in the future.") from None


@dataclass(frozen=True)
class EventReferences:
    """The objects an event is linked to, all of the event's bot."""

    conversation: Conversation | None = None
    user: User | None = None
    message: Message | None = None
    workflow: Workflow | None = None
    integration: IntegrationInstallation | None = None


def event_references_resolve(
    *,
    bot_id: str,
    conversation_id: str | None = None,
    user_id: str | None = None,
    message_id: str | None = None,
    workflow_id: str | None = None,
    integration: IntegrationInstallation | None = None,
) -> EventReferences:
    """The referenced objects, or MissingReference for one the bot does not own."""
    return EventReferences(
        conversation=None
        if conversation_id is None
        else conversation_reference_get(bot_id=bot_id, conversation_id=conversation_id),
        user=None if user_id is None else user_reference_get(bot_id=bot_id, user_id=user_id),
        message=None
        if message_id is None
        else message_reference_get(bot_id=bot_id, message_id=message_id),
        workflow=None
        if workflow_id is None
        else workflow_reference_get(bot_id=bot_id, workflow_id=workflow_id),
        integration=integration,
    )


def integration_installation_resolve(
    *, bot_id: str, integration_id: str | None, alias: str | None
) -> IntegrationInstallation | None:
    """The installation named by the x-integration-id / x-integration-alias headers."""
    if not integration_id and not alias:
        return None
    installations = IntegrationInstallation.objects.filter(bot_id=bot_id)
    if integration_id:
        installations = installations.filter(integration_id=integration_id)
    if alias:
        installations = installations.filter(alias=alias)
    installation = installations.order_by("id").first()
    if installation is None:
        named = " and ".join(
            f"{header} {value[:40]!r}"
            for header, value in (
                ("x-integration-id", integration_id),
                ("x-integration-alias", alias),
            )
            if value
        )
        raise MissingReference(f"No integration with {named} is installed on this bot")
    return installation


def event_create(
    *,
    bot_id: str,
    type: str,
    payload: dict[str, Any],
    schedule: dict[str, Any] | None = None,
    conversation_id: str | None = None,
    user_id: str | None = None,
    message_id: str | None = None,
    workflow_id: str | None = None,
    integration_id: str | None = None,
    integration_alias: str | None = None,
) -> Event:
    """An event a client creates: what it references must belong to the bot.

    One INSERT, atomic by itself, so no transaction is opened around it (that
    would cost two more round trips on the hottest write). An object deleted
    between the check and the insert fails the foreign key, and is reported
    as the missing reference it has become."""
    references = event_references_resolve(
        bot_id=bot_id,
        conversation_id=conversation_id,
        user_id=user_id,
        message_id=message_id,
        workflow_id=workflow_id,
        integration=integration_installation_resolve(
            bot_id=bot_id, integration_id=integration_id, alias=integration_alias
        ),
    )
    try:
        return event_record(
            bot_id=bot_id, type=type, payload=payload, schedule=schedule, references=references
        )
    except IntegrityError:
        raise MissingReference("A referenced object was deleted while the event was made") from None


def event_build(
    *,
    bot_id: str,
    type: str,
    payload: dict[str, Any],
    schedule: dict[str, Any] | None = None,
    references: EventReferences = EventReferences(),  # noqa: B008 - frozen, never mutated
) -> Event:
    """An event for a bot, not stored yet, with references already checked:
    `pending` when due now (no schedule, a delay of 0, a past dateTime), else
    `scheduled` until a worker finds it due. Stored by event_record, or by a
    caller that writes it with other rows (platform_site.foundation.sql.row_insert), then
    event_stored."""
    now = timezone.now()
    due_at = due_time(schedule=schedule, now=now)
    due_now = due_at <= now
    return Event(
        bot_id=bot_id,
        type=type,
        payload=payload,
        status=EventStatus.PENDING if due_now else EventStatus.SCHEDULED,
        due_at=due_at,
        next_attempt_at=now if due_now else due_at,
        conversation=references.conversation,
        user=references.user,
        message=references.message,
        workflow=references.workflow,
        integration=references.integration,
    )


def _falls_due_soon(moment: datetime) -> bool:
    """Whether `moment` comes before the workers would look at the table again."""
    return moment - timezone.now() < timedelta(seconds=2 * settings.EVENT_DISPATCH_INTERVAL)


def event_stored(event: Event) -> None:
    """What follows an event's INSERT: when it falls due before the workers
    would look again, a worker is woken once the row is committed, so that
    it claims the event on time; should the wake-up be lost, their next
    look finds it."""
    # Counted once committed: a create rolled back (an idempotent replay, a
    # failed request) made nothing. One callback either way.
    if _falls_due_soon(event.due_at):
        transaction.on_commit(_event_committed_due)
    else:
        transaction.on_commit(metrics.event_created)


def _event_committed_due() -> None:
    metrics.event_created()
    deliveries_wake()


def events_stored(events: Sequence[Event]) -> None:
    """event_stored for events inserted together, in one callback for them all."""
    wake = any(_falls_due_soon(event.due_at) for event in events)
    transaction.on_commit(partial(_events_committed, len(events), wake=wake))


def _events_committed(count: int, *, wake: bool) -> None:
    metrics.events_count("created", count)
    if wake:
        deliveries_wake()


def clock_row_stored(*, due_at: datetime) -> None:
    """What follows the write of a row that falls due on the delivery clock
    (another app's ClockWork: events/engine/clock_work.py) at `due_at`: when
    that comes before the workers would look again on their own, a worker
    is woken once the row is committed, and its claim learns when to wake
    next (wake-ups asked for together go as one: wakeups.py)."""
    if _falls_due_soon(due_at):
        transaction.on_commit(deliveries_wake)


def event_record(
    *,
    bot_id: str,
    type: str,
    payload: dict[str, Any],
    schedule: dict[str, Any] | None = None,
    references: EventReferences = EventReferences(),  # noqa: B008 - frozen, never mutated
) -> Event:
    """Store an event for a bot (event_build), in the caller's transaction or alone."""
    event = event_build(
        bot_id=bot_id, type=type, payload=payload, schedule=schedule, references=references
    )
    row_insert(event)
    event_stored(event)
    return event


def event_cancel(*, bot: Bot, event_id: str) -> None:
    """Cancel a scheduled event. One conditional UPDATE, so a cancel racing
    a claim either wins before the event is claimed or is refused."""
    canceled = Event.objects.filter(bot=bot, id=event_id, status=EventStatus.SCHEDULED).update(
        status=EventStatus.CANCELED, next_attempt_at=None, updated_at=timezone.now()
    )
    if canceled:
        transaction.on_commit(metrics.event_canceled)
    else:
        event = event_get(bot=bot, event_id=event_id)
        raise InvalidValue(
            f"Event {event.id!r} is {event.status}: only a scheduled event can be canceled"
        )


RETRYABLE_STATUSES = (EventStatus.FAILED, EventStatus.IGNORED)


def events_retry(*, event_ids: Sequence[str]) -> int:
    """Deliver failed or ignored events again, now, with a new retry window;
    answers how many were taken (the others are not failed or ignored)."""
    now = timezone.now()
    with transaction.atomic():
        retried = Event.objects.filter(id__in=event_ids, status__in=RETRYABLE_STATUSES).update(
            status=EventStatus.PENDING,
            failure_reason=None,
            next_attempt_at=now,
            lease=0,
            first_attempt_at=None,
            updated_at=now,
        )
        if retried:
            transaction.on_commit(deliveries_wake)
    return retried
