"""Writes of a bot's states (the runtime States API): set (an upsert; a
null payload deletes), patch, get-or-set, and the expiry alone.

Expiry is idleness: every write moves `expires_at` to now + expiry; reads
do not. An expired state is absent to every read and write before the
delivery clock has swept it: a write that meets one retires it first, with
its `state_expired` event (chat/services/state_expiry.py), then writes a
fresh state.

The general path runs in a transaction with the ORM, on every database. On
PostgreSQL a set (and the making of a get-or-set) is first tried as one
statement, an INSERT … ON CONFLICT that also checks the target: it settles
the common cases, and leaves the others (no such target, an expired row, a
twin's insert) to the general path."""

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from enum import Enum
from functools import cache
from typing import Any, Final, Literal

import orjson
from django.db import IntegrityError, connection, transaction
from django.db.models import Model
from django.utils import timezone

from bots.models import Conversation, User, Workflow
from chat.models import STATE_PAYLOAD_MAX_BYTES, State, StateType
from chat.selectors.states import (
    StateKey,
    state_get,
    state_not_found,
    state_target_not_found,
    states_of_key,
)
from chat.services.state_expiry import STATE_REFERENCES, states_retire
from events.services.events import clock_row_stored
from platform_site.foundation.domain_errors import NotFound, TooLarge
from platform_site.foundation.ids import new_id
from platform_site.foundation.sql.row_insert import row_insert


class Keep(Enum):
    """An expiry left out of a write: the state keeps the one it has."""

    EXPIRY = "keep"


KEEP: Final = Keep.EXPIRY
Expiry = int | None | Literal[Keep.EXPIRY]

# The model of each type's target (a bot's own state has the bot, checked
# by the key).
_TARGETS: dict[StateType, type[Model]] = {
    StateType.CONVERSATION: Conversation,
    StateType.USER: User,
    StateType.WORKFLOW: Workflow,
}


def state_set(*, key: StateKey, payload: dict[str, Any], expiry: Expiry = KEEP) -> State:
    """Set the key's state to `payload`, made if absent (with no expiry
    unless one is given). NotFound when its target is not the bot's."""
    encoded = _payload_encoded(payload)
    now = timezone.now()
    state = _inserted_or_updated(key, encoded, payload, expiry, now)
    if state is None:
        with transaction.atomic():
            state, created = _locked_or_created(
                key, now, lambda: _new_state(key, payload, _initial(expiry), now)
            )
            if not created:
                _update(state, now=now, expiry=expiry, payload=payload)
    _expiry_noted(state)
    return state


def state_delete(*, key: StateKey) -> State:
    """Delete the key's state, answered as it was (NotFound if absent)."""
    with transaction.atomic():
        state = _locked(key, timezone.now())
        if state is not None:
            State.objects.filter(pk=state.pk).delete()  # the instance keeps its id
    return _found(key, state)


def state_patch(*, key: StateKey, payload: dict[str, Any], expiry: Expiry = KEEP) -> State:
    """Merge `payload` into the key's state: each of its top-level keys
    replaces the stored one. NotFound if absent."""
    now = timezone.now()
    with transaction.atomic():
        state = _locked(key, now)
        if state is not None:
            merged = {**state.payload, **payload}
            _payload_encoded(merged)
            _update(state, now=now, expiry=expiry, payload=merged)
    patched = _found(key, state)
    _expiry_noted(patched)
    return patched


def state_get_or_set(
    *, key: StateKey, payload: dict[str, Any], expiry: int | None = None
) -> tuple[State, bool]:
    """The key's state as it is (False), or one made with `payload` and
    `expiry` (True). NotFound when its target is not the bot's."""
    encoded = _payload_encoded(payload)  # refused alike, whether or not it is used
    now = timezone.now()
    try:
        return state_get(key=key, now=now), False
    except NotFound:
        pass
    state = _inserted(key, encoded, payload, expiry, now)
    if state is None:
        with transaction.atomic():
            state, created = _locked_or_created(
                key, now, lambda: _new_state(key, payload, expiry, now)
            )
    else:
        created = True
    if created:
        _expiry_noted(state)
    return state, created


def state_expiry_set(*, key: StateKey, expiry: int | None) -> State:
    """Give the key's state this expiry (None: none), from now. NotFound if absent."""
    now = timezone.now()
    with transaction.atomic():
        state = _locked(key, now)
        if state is not None:
            _update(state, now=now, expiry=expiry)
    changed = _found(key, state)
    _expiry_noted(changed)
    return changed


# --- the general path -----------------------------------------------------------------


def _locked(key: StateKey, now: datetime) -> State | None:
    """The key's state, locked until the caller's transaction ends; one
    expired at `now` is retired on the way, and is None."""
    state = (
        states_of_key(key).select_related(*STATE_REFERENCES).select_for_update(of=("self",)).first()
    )
    if state is not None and state.expires_at is not None and state.expires_at <= now:
        states_retire([state])
        return None
    return state


def _found(key: StateKey, state: State | None) -> State:
    """The state a change was made to, or NotFound. Raised once the change's
    transaction is over, so that an expired state met on the way stays
    retired (its event written)."""
    if state is None:
        raise state_not_found(key)
    return state


def _locked_or_created(
    key: StateKey, now: datetime, make: Callable[[], State]
) -> tuple[State, bool]:
    """The key's state, locked (False), or the one `make` builds, inserted
    (True), in the caller's transaction. When a twin request inserts the key
    first, its state is the one found."""
    while True:
        state = _locked(key, now)
        if state is not None:
            return state, False
        target = _TARGETS.get(key.type)
        if target is not None and not _owned(target, key):
            raise state_target_not_found(key)
        state = make()
        try:
            with transaction.atomic():
                row_insert(state)
        except IntegrityError:
            continue  # the key is taken now: lock the twin's state
        return state, True


def _owned(model: type[Model], key: StateKey) -> bool:
    return model._default_manager.filter(pk=key.target_id, bot_id=key.bot_id).exists()


def _update(
    state: State, *, now: datetime, expiry: Expiry, payload: dict[str, Any] | None = None
) -> None:
    """Write `payload` (when given) and `expiry` (unless KEEP) to a live,
    locked state: a write, so its expiry runs from now."""
    fields = ["expiry", "expires_at", "updated_at"]
    if payload is not None:
        state.payload = payload
        fields.append("payload")
    if expiry is not KEEP:
        state.expiry = expiry
    state.expires_at = _expires_at(state.expiry, now)
    state.updated_at = now
    state.save(update_fields=fields)


def _new_state(key: StateKey, payload: dict[str, Any], expiry: int | None, now: datetime) -> State:
    target = {f"{key.type.value}_id": key.target_id} if key.type in _TARGETS else {}
    return State(
        id=new_id("state"),
        bot_id=key.bot_id,
        type=key.type.value,
        target_id=key.target_id,
        name=key.name,
        payload=payload,
        expiry=expiry,
        expires_at=_expires_at(expiry, now),
        created_at=now,
        updated_at=now,
        **target,
    )


def _initial(expiry: Expiry) -> int | None:
    """The expiry of a state made by a write that may keep one."""
    return None if expiry is KEEP else expiry


def _expires_at(expiry: int | None, now: datetime) -> datetime | None:
    return None if expiry is None else now + timedelta(milliseconds=expiry)


def _payload_encoded(payload: dict[str, Any]) -> str:
    """`payload` as compact JSON, unless over STATE_PAYLOAD_MAX_BYTES (TooLarge)."""
    try:
        encoded = orjson.dumps(payload)
    except orjson.JSONEncodeError:  # an integer beyond 64 bits: the standard library writes it
        encoded = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    if len(encoded) > STATE_PAYLOAD_MAX_BYTES:
        raise TooLarge(
            f"payload: {len(encoded)} bytes of JSON, over the limit of"
            f" {STATE_PAYLOAD_MAX_BYTES} bytes"
        )
    return encoded.decode()


def _expiry_noted(state: State) -> None:
    """A write that set an expiry wakes the delivery clock if it comes soon."""
    if state.expires_at is not None:
        clock_row_stored(due_at=state.expires_at)


# --- PostgreSQL's one statement -------------------------------------------------------


# What a new state's columns are given: its own values, but one `now` for
# both times. Parameters are sent untyped: each is cast, so that one used
# twice (in the target's check too) has one type.
_VALUES = {
    "id": "%(id)s::text",
    "bot_id": "%(bot_id)s::text",
    "type": "%(type)s::text",
    "target_id": "%(target_id)s::text",
    "name": "%(name)s::text",
    "conversation_id": "%(conversation_id)s::text",
    "user_id": "%(user_id)s::text",
    "workflow_id": "%(workflow_id)s::text",
    "payload": "%(payload)s::jsonb",
    "expiry": "%(expiry)s::bigint",
    "expires_at": "%(expires_at)s::timestamptz",
    "created_at": "%(now)s::timestamptz",
    "updated_at": "%(now)s::timestamptz",
}
_OWN_VALUES = [name for name in _VALUES if name not in ("payload", "created_at", "updated_at")]


@cache
def _insert_sql(state_type: StateType, conflict: str) -> str:
    """INSERT of a new state, if its target is the bot's, and `conflict`
    (an ON CONFLICT action) where the key is taken."""
    quote = connection.ops.quote_name
    target = _TARGETS.get(state_type)
    owned = (
        ""
        if target is None
        else f" WHERE EXISTS (SELECT 1 FROM {quote(target._meta.db_table)} t"
        f" WHERE t.{quote('id')} = %(target_id)s AND t.{quote('bot_id')} = %(bot_id)s)"
    )
    return (
        f"INSERT INTO {quote(State._meta.db_table)} AS s"
        f" ({', '.join(quote(column) for column in _VALUES)})"
        f" SELECT {', '.join(_VALUES.values())}{owned}"
        f" ON CONFLICT ({quote('bot_id')}, {quote('type')}, {quote('target_id')}, {quote('name')})"
        f" {conflict}"
        " RETURNING s.id, s.created_at, s.expiry, s.expires_at"
    )


# A set replaces the payload of a live state; an expired one is left to the
# general path (its event comes first).
_UPDATE_LIVE = (
    "DO UPDATE SET payload = EXCLUDED.payload, updated_at = EXCLUDED.updated_at, {expiry}"
    " WHERE s.expires_at IS NULL OR s.expires_at > EXCLUDED.updated_at"
)
_NEW_EXPIRY = "expiry = EXCLUDED.expiry, expires_at = EXCLUDED.expires_at"
_KEPT_EXPIRY = "expires_at = EXCLUDED.updated_at + s.expiry * interval '1 millisecond'"


def _inserted_or_updated(
    key: StateKey, encoded: str, payload: dict[str, Any], expiry: Expiry, now: datetime
) -> State | None:
    """The set in one statement, on PostgreSQL; None when it could not tell."""
    conflict = _UPDATE_LIVE.format(expiry=_KEPT_EXPIRY if expiry is KEEP else _NEW_EXPIRY)
    return _one_statement(key, encoded, payload, _initial(expiry), now, conflict)


def _inserted(
    key: StateKey, encoded: str, payload: dict[str, Any], expiry: int | None, now: datetime
) -> State | None:
    """The making of a get-or-set in one statement, on PostgreSQL; None when
    it made nothing."""
    return _one_statement(key, encoded, payload, expiry, now, "DO NOTHING")


def _one_statement(
    key: StateKey,
    encoded: str,
    payload: dict[str, Any],
    expiry: int | None,
    now: datetime,
    conflict: str,
) -> State | None:
    if connection.vendor != "postgresql":
        return None
    state = _new_state(key, payload, expiry, now)
    values = {name: getattr(state, name) for name in _OWN_VALUES}
    with connection.cursor() as cursor:
        cursor.execute(_insert_sql(key.type, conflict), {**values, "payload": encoded, "now": now})
        row = cursor.fetchone()
    if row is None:
        return None
    state.id, state.created_at, state.expiry, state.expires_at = row
    state._state.adding = False
    return state
