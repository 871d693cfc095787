"""States: the key a request names (its type, target id and name, checked
without a query), the live state of a key, and when the next one expires.

An expired state reads as absent everywhere, swept or not: every read
filters on `expires_at`."""

import re
from dataclasses import dataclass
from datetime import datetime
from functools import cache

from django.db import connection
from django.db.models import Min, QuerySet
from django.utils import timezone

from bots.models import Bot
from chat.models import STATE_NAME_MAX_LENGTH, State, StateType
from platform_site.foundation.domain_errors import InvalidValue, MalformedId, NotFound
from platform_site.foundation.ids import is_id
from platform_site.foundation.lookups import object_not_found
from platform_site.foundation.sql.row_select import instance_from_row, select_list

# The id prefix and noun of each type's target.
STATE_TARGETS = {
    StateType.CONVERSATION: ("conv", "conversation"),
    StateType.USER: ("user", "user"),
    StateType.BOT: ("bot", "bot"),
    StateType.WORKFLOW: ("wf", "workflow"),
}
# Plugins prefix their states' names with their alias and `#`.
STATE_NAME_RE = rf"[A-Za-z0-9_.#:-]{{1,{STATE_NAME_MAX_LENGTH}}}"
_STATE_NAME = re.compile(STATE_NAME_RE)


@dataclass(frozen=True)
class StateKey:
    """What names one state of a bot: its type, its target's id, its name."""

    bot_id: str
    type: StateType
    target_id: str
    name: str

    def __str__(self) -> str:
        return f"State {self.name!r} of {self.type} {self.target_id!r}"


def state_key(*, bot: Bot, type: str, target_id: str, name: str) -> StateKey:
    """The key of the bot's state that a request names. A type this service
    does not serve, or a name out of its rules, is InvalidValue; a target id
    that is no conversation, user, bot or workflow id is MalformedId. One of
    another kind than the type's names nothing of that type (NotFound, as the
    OpenAPI document cannot tie the id's form to the type), nor does another
    bot's id. Whether the target exists is the reads' and writes' to find."""
    if type == "integration":
        raise InvalidValue(
            "type: States of integrations are not served here (this service runs no"
            " integrations); use conversation, user, bot or workflow"
        )
    if type not in STATE_TARGETS:
        raise InvalidValue(f"type: {type[:40]!r} is not one of conversation, user, bot, workflow")
    if not any(is_id(target_id, prefix) for prefix, _ in STATE_TARGETS.values()):
        raise MalformedId(f"{target_id[:40]!r} is not a conversation, user, bot or workflow id")
    if _STATE_NAME.fullmatch(name) is None:
        raise InvalidValue(
            f"name: {name[:40]!r} is not 1 to {STATE_NAME_MAX_LENGTH} letters, digits and _ - . # :"
        )
    key = StateKey(bot_id=bot.id, type=StateType(type), target_id=target_id, name=name)
    prefix = STATE_TARGETS[key.type][0]
    if not is_id(target_id, prefix) or (key.type is StateType.BOT and target_id != bot.id):
        raise state_target_not_found(key)
    return key


def state_target_not_found(key: StateKey) -> NotFound:
    return object_not_found(STATE_TARGETS[key.type][1], key.target_id)


def state_not_found(key: StateKey) -> NotFound:
    return NotFound(f"{key} not found")


def states_of_key(key: StateKey) -> QuerySet[State]:
    """The key's state, expired or not (one row at most)."""
    return State.objects.filter(
        bot_id=key.bot_id, type=key.type, target_id=key.target_id, name=key.name
    )


@cache
def _get_sql() -> str:
    quote = connection.ops.quote_name
    return (
        f"SELECT {select_list(State, 's')} FROM {quote(State._meta.db_table)} s"
        f" WHERE s.{quote('bot_id')} = %s AND s.{quote('type')} = %s"
        f" AND s.{quote('target_id')} = %s AND s.{quote('name')} = %s"
        f" AND (s.{quote('expires_at')} IS NULL OR s.{quote('expires_at')} > %s)"
    )


def state_get(*, key: StateKey, now: datetime | None = None) -> State:
    """The key's state, unless absent or expired at `now` (NotFound): one
    statement written once, the hottest read of states (no ORM compilation).
    A target that does not exist, or is another bot's, has no state."""
    with connection.cursor() as cursor:
        cursor.execute(
            _get_sql(),
            [
                key.bot_id,
                key.type.value,
                key.target_id,
                key.name,
                connection.ops.adapt_datetimefield_value(now or timezone.now()),
            ],
        )
        row = cursor.fetchone()
    if row is None:
        raise state_not_found(key)
    state: State = instance_from_row(State, row)  # type: ignore[assignment]
    return state


def state_next_expiry(*, after: datetime | None) -> datetime | None:
    """When the next state expires, if one does later than `after` (the
    first of all with None; the delivery clock's next_due): one read of the
    expiry index."""
    states = State.objects.all()
    if after is not None:
        states = states.filter(expires_at__gt=after)
    moment: datetime | None = states.aggregate(first=Min("expires_at"))["first"]
    return moment
