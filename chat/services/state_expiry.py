"""States that expire: a state whose `expires_at` has passed becomes a
`state_expired` event for its bot, once, and its row goes.

The delivery workers' clock (events/engine/clock_work.py, registered by
ChatConfig.ready) runs states_expire before each claim: it takes the
expired rows through the expiry index, with no task per state and no scan
of the others. A write that meets an expired row the clock has not taken
yet retires it the same way first (chat/services/states.py): whichever
deletes the row writes its event, in the same transaction, so the bot hears
of each expiry exactly once."""

from collections.abc import Sequence
from datetime import datetime

from django.db import transaction

from chat.event_types import STATE_EXPIRED
from chat.models import State
from chat.presenters import state_json
from events.models import Event
from events.services.events import EventReferences, event_build, events_stored

# Expired states retired per transaction, at most.
EXPIRE_BATCH = 500
# What an expired state's event links to (its references, loaded with it).
STATE_REFERENCES = ("conversation", "user", "workflow")


def states_retire(states: Sequence[State]) -> None:
    """Write the `state_expired` event of each of `states` (their rows
    locked by the caller's transaction, their references loaded) and
    delete them."""
    events = [
        event_build(
            bot_id=state.bot_id,
            type=STATE_EXPIRED,
            payload={"state": state_json(state)},
            references=EventReferences(
                conversation=state.conversation, user=state.user, workflow=state.workflow
            ),
        )
        for state in states
    ]
    Event.objects.bulk_create(events)
    State.objects.filter(pk__in=[state.pk for state in states]).delete()
    events_stored(events)


def states_expire(*, now: datetime, batch: int = EXPIRE_BATCH) -> int:
    """Retire the states expired at `now`, earliest first, `batch` per
    transaction until a batch comes back short; how many it retired.
    Processes doing this at once take different rows (SKIP LOCKED), and a
    row a write holds is left to that write."""
    retired = 0
    while True:
        with transaction.atomic():
            expired = list(
                State.objects.filter(expires_at__lte=now)
                .select_related(*STATE_REFERENCES)
                .order_by("expires_at")
                .select_for_update(skip_locked=True, of=("self",))[:batch]
            )
            if expired:
                states_retire(expired)
        retired += len(expired)
        if len(expired) < batch:
            return retired
