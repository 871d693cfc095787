"""Range partitions on PostgreSQL, for tables that grow with traffic.

A table partitioned here has three kinds of partition:

- `<table>_p0`, what the table held when it was converted (from MINVALUE to
  the conversion's boundary): the rows stay where they were, so converting
  a table of any size holds its writes for milliseconds (`table_partitioned`);
- partitions its owner makes ahead, one per range (`partition_add`) and drops
  whole once every row in them may go (`partition_drop`): DETACH and DROP,
  a catalog change, where a DELETE of the same rows writes each of them to
  the WAL and leaves the space to a vacuum;
- `<table>_pdefault`, for rows no partition was made for yet (say the owner's
  task did not run for longer than partitions are made ahead): an insert
  never fails for want of a partition, and those rows move to their
  partition when it is made.

Every change that takes a lock the table's readers or writers wait on does
so under a short `lock_timeout`: behind a long transaction it gives up (and
is tried again by the next run) rather than queueing every query behind it.

SQLite has none of this: the embedded default is one machine and keeps its
plain tables."""

import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta

from django.db import DatabaseError, OperationalError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper

LOCK_TIMEOUT = "2s"
DEFAULT_SUFFIX = "_pdefault"
CONVERTED_SUFFIX = "_p0"

_RANGE = re.compile(r"FOR VALUES FROM \((.+)\) TO \((.+)\)")
_INDEX_TABLE = re.compile(r" ON (\S+) USING ")


@dataclass(frozen=True)
class Partition:
    name: str
    lower: str | None  # None: from MINVALUE, or the default partition
    upper: str | None  # None: to MAXVALUE, or the default partition
    is_default: bool = False


class LockUnavailable(Exception):
    """A partition change gave up waiting for its lock (`LOCK_TIMEOUT`)."""


class RaceLost(Exception):
    """Another process made (or dropped) the partition first."""


def is_partitioned(connection: BaseDatabaseWrapper, table: str) -> bool:
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind = 'p' FROM pg_class WHERE oid = to_regclass(%s)", [table])
        row = cursor.fetchone()
    return bool(row and row[0])


def partitions(connection: BaseDatabaseWrapper, table: str) -> list[Partition]:
    """The partitions of `table`, lowest range first, the default one last."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits AS i"
            " JOIN pg_class AS c ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass",
            [table],
        )
        found = [_partition(name, bound) for name, bound in cursor.fetchall()]
    return sorted(found, key=lambda p: (p.is_default, p.lower is not None, p.lower or ""))


def partition_add(
    connection: BaseDatabaseWrapper, table: str, name: str, lower: str, upper: str
) -> bool:
    """Make partition `name` of `table` for keys in [lower, upper), with the
    storage parameters (autovacuum's) of the newest partition; rows of that
    range waiting in the default partition move into it. False when it
    existed already."""
    existing = partitions(connection, table)
    if any(p.name == name or _overlaps(p, lower, upper) for p in existing):
        return False
    key = _partition_key(connection, table)
    bound = f"FOR VALUES FROM ({_literal(lower)}) TO ({_literal(upper)})"
    storage = _storage_clause(connection, table, existing)
    try:
        return _partition_made(connection, table, name, key, bound, storage, lower, upper)
    except RaceLost:
        return False


def _partition_made(
    connection: BaseDatabaseWrapper,
    table: str,
    name: str,
    key: str,
    bound: str,
    storage: str,
    lower: str,
    upper: str,
) -> bool:
    q = connection.ops.quote_name
    default = table + DEFAULT_SUFFIX
    with _locking(connection) as cursor:
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM {q(default)} WHERE {q(key)} >= %s AND {q(key)} < %s)",
            [lower, upper],
        )
        (stranded,) = cursor.fetchone()
        if not stranded:
            cursor.execute(f"CREATE TABLE {q(name)} PARTITION OF {q(table)} {bound}{storage}")
            return True
        # The default partition cannot hold rows of a range that has a
        # partition, so they move while it is detached; this holds the
        # table's writes for as long as the move takes, and happens only
        # after partitions were not made in time.
        cursor.execute(f"ALTER TABLE {q(table)} DETACH PARTITION {q(default)}")
        cursor.execute(f"CREATE TABLE {q(name)} PARTITION OF {q(table)} {bound}{storage}")
        cursor.execute(
            f"WITH moved AS (DELETE FROM {q(default)} WHERE {q(key)} >= %s AND {q(key)} < %s"
            f" RETURNING *) INSERT INTO {q(table)} SELECT * FROM moved",
            [lower, upper],
        )
        cursor.execute(f"ALTER TABLE {q(table)} ATTACH PARTITION {q(default)} DEFAULT")
    return True


def partitions_make(
    connection: BaseDatabaseWrapper,
    table: str,
    *,
    first: date,
    last: date,
    span_days: int,
    key_at: Callable[[date], str],
) -> int:
    """Make the partitions of `table` for every period of `span_days` days
    from the one holding `first` to the one holding `last` (periods begin on
    a Monday when they are weeks), each named `<table>_p<its first day>`;
    `key_at(day)` is the lowest key of rows made on `day`. A range a
    partition covers already is left out, so that a change of span (or the
    converted partition) leaves neither overlap nor gap. How many were made;
    one that cannot get its lock now is left for the next run."""
    covered = max((p.upper for p in partitions(connection, table) if p.upper), default="")
    made = 0
    start = _period_start(first, span_days)
    while start <= last:
        end = start + timedelta(days=span_days)
        lower, upper = max(key_at(start), covered), key_at(end)
        if lower < upper:
            try:
                made += partition_add(connection, table, f"{table}_p{start:%Y%m%d}", lower, upper)
            except LockUnavailable:
                break  # the next ones would leave a gap behind it
            covered = upper
        start = end
    return made


def _period_start(day: date, span_days: int) -> date:
    # Ordinal 1 (0001-01-01) was a Monday.
    ordinal = day.toordinal()
    return date.fromordinal(ordinal - (ordinal - 1) % span_days)


def partition_drop(connection: BaseDatabaseWrapper, table: str, name: str) -> None:
    """Detach partition `name` from `table` and drop it, rows and all."""
    q = connection.ops.quote_name
    with contextlib.suppress(RaceLost), _locking(connection) as cursor:
        cursor.execute(f"ALTER TABLE {q(table)} DETACH PARTITION {q(name)}")
        cursor.execute(f"DROP TABLE {q(name)}")


def table_partitioned(
    connection: BaseDatabaseWrapper,
    table: str,
    key: str,
    boundary: str,
    *,
    primary_key: tuple[str, ...] | None = None,
    tries: int = 30,
) -> None:
    """Turn `table` into a table partitioned by range of `key`, without
    holding its writes for longer than a catalog change: its rows stay where
    they are, as partition `<table>_p0` of every key below `boundary` (so
    `boundary` must be above every key written until this returns), beside an
    empty default partition; the caller makes the partitions from `boundary`
    on. The new table has the old one's columns, defaults, indexes and
    constraints, under their names.

    A partitioned table's primary key must hold its partition key: given
    `primary_key`, the old key is first replaced by one on those columns,
    built concurrently. Reading the old rows to prove they are all below
    `boundary` (so that attaching them reads nothing) takes a lock that lets
    writes through; the switch itself is one short transaction, tried
    `tries` times should it not get its lock within LOCK_TIMEOUT."""
    q = connection.ops.quote_name
    check = _name(table, "_p0_bound")
    with connection.cursor() as cursor:
        _refuse_referenced(cursor, table)
        if primary_key:
            _primary_key_replaced(connection, table, primary_key)
        # A failed try's, then this one's.
        cursor.execute(f"ALTER TABLE {q(table)} DROP CONSTRAINT IF EXISTS {q(check)}")
        cursor.execute(
            f"ALTER TABLE {q(table)} ADD CONSTRAINT {q(check)}"
            f" CHECK ({q(key)} IS NOT NULL AND {q(key)} < {_literal(boundary)}) NOT VALID"
        )
        cursor.execute(f"ALTER TABLE {q(table)} VALIDATE CONSTRAINT {q(check)}")
    for attempt in range(tries):
        try:
            with _locking(connection) as cursor:
                _switch(cursor, connection, table, key, boundary, check)
            return
        except LockUnavailable:
            if attempt == tries - 1:
                raise
            time.sleep(1)


def _switch(
    cursor: CursorWrapper,
    connection: BaseDatabaseWrapper,
    table: str,
    key: str,
    boundary: str,
    check: str,
) -> None:
    q = connection.ops.quote_name
    old = table + CONVERTED_SUFFIX
    cursor.execute(f"LOCK TABLE {q(table)} IN ACCESS EXCLUSIVE MODE")
    _refuse_referenced(cursor, table)
    indexes = _indexes(cursor, table)
    foreign_keys = _foreign_keys(cursor, table)
    # Identity columns: PostgreSQL 15 refuses them on a partitioned table,
    # and the old table's sequence would go when its partition is dropped.
    # The new table draws from a sequence of its own, from where the old left off.
    cursor.execute(
        "SELECT attname, pg_get_serial_sequence(%s, attname) FROM pg_attribute"
        " WHERE attrelid = %s::regclass AND attidentity <> '' ORDER BY attnum",
        [table, table],
    )
    identities = []
    for column, sequence in cursor.fetchall():
        cursor.execute(f"SELECT last_value, is_called FROM {sequence}")
        identities.append((column, *cursor.fetchone()))

    _set_aside(cursor, connection, table, old, indexes, CONVERTED_SUFFIX)
    for column, _, _ in identities:
        cursor.execute(f"ALTER TABLE {q(old)} ALTER {q(column)} DROP IDENTITY")

    keys = [f"CONSTRAINT {q(c)} {definition}" for _, _, c, definition in indexes if c]
    cursor.execute(
        f"CREATE TABLE {q(table)} (LIKE {q(old)} INCLUDING DEFAULTS INCLUDING STORAGE"
        f" INCLUDING CONSTRAINTS{''.join(', ' + k for k in keys)}) PARTITION BY RANGE ({q(key)})"
    )
    # Check constraints are copied as they are (written out again, one would
    # not be the same expression, and attaching would refuse the old table),
    # the bound, which is the old table's alone, aside.
    cursor.execute(f"ALTER TABLE {q(table)} DROP CONSTRAINT {q(check)}")
    # A sequence a column owns (serial-like) would go with the old table's
    # partition: the new table's column owns it.
    for column, sequence in _owned_sequences(cursor, old):
        cursor.execute(f"ALTER SEQUENCE {q(sequence)} OWNED BY {q(table)}.{q(column)}")
    for column, last_value, is_called in identities:
        sequence = _name(table, f"_{column}_seq")
        cursor.execute(f"CREATE SEQUENCE {q(sequence)} AS bigint OWNED BY {q(table)}.{q(column)}")
        cursor.execute("SELECT setval(%s, %s, %s)", [sequence, last_value, is_called])
        cursor.execute(
            f"ALTER TABLE {q(table)} ALTER {q(column)} SET DEFAULT nextval({_literal(sequence)})"
        )
    for name, definition in foreign_keys:
        cursor.execute(f"ALTER TABLE {q(table)} ADD CONSTRAINT {q(name)} {definition}")
    for _, definition, constraint, _ in indexes:
        if not constraint:
            # ON ONLY: the index is the parent's alone; attaching the old
            # table below adopts its matching index rather than building one.
            cursor.execute(_INDEX_TABLE.sub(" ON ONLY \\1 USING ", definition, count=1))
    cursor.execute(
        f"ALTER TABLE {q(table)} ATTACH PARTITION {q(old)}"
        f" FOR VALUES FROM (MINVALUE) TO ({_literal(boundary)})"
    )
    cursor.execute(f"ALTER TABLE {q(old)} DROP CONSTRAINT {q(check)}")
    storage = _storage_clause(connection, table)
    cursor.execute(
        f"CREATE TABLE {q(table + DEFAULT_SUFFIX)} PARTITION OF {q(table)} DEFAULT{storage}"
    )


def table_unpartitioned(
    connection: BaseDatabaseWrapper, table: str, *, primary_key: tuple[str, ...] | None = None
) -> None:
    """Undo `table_partitioned`: `table` becomes a plain table again, with
    every row copied into it (its writes held meanwhile), the indexes and
    constraints of the partitioned table under their names, and, given
    `primary_key`, that primary key."""
    q = connection.ops.quote_name
    old = _name(table, "_partitioned")
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {q(table)} IN ACCESS EXCLUSIVE MODE")
        indexes = _indexes(cursor, table)
        foreign_keys = _foreign_keys(cursor, table)
        storage = _storage_clause(connection, table)
        _set_aside(cursor, connection, table, old, indexes, "_partitioned")
        cursor.execute(
            f"CREATE TABLE {q(table)} (LIKE {q(old)} INCLUDING DEFAULTS INCLUDING STORAGE"
            f" INCLUDING CONSTRAINTS){storage}"
        )
        for column, sequence in _owned_sequences(cursor, old):
            cursor.execute(f"ALTER SEQUENCE {q(sequence)} OWNED BY {q(table)}.{q(column)}")
        cursor.execute(f"INSERT INTO {q(table)} SELECT * FROM {q(old)}")
        for _, definition, constraint, constraint_definition in indexes:
            if primary_key and (constraint_definition or "").startswith("PRIMARY KEY"):
                constraint_definition = f"PRIMARY KEY ({', '.join(q(c) for c in primary_key)})"
            if constraint:
                cursor.execute(
                    f"ALTER TABLE {q(table)} ADD CONSTRAINT {q(constraint)} {constraint_definition}"
                )
            else:
                cursor.execute(_INDEX_TABLE.sub(f" ON {q(table)} USING ", definition, count=1))
        for name, definition in foreign_keys:
            cursor.execute(f"ALTER TABLE {q(table)} ADD CONSTRAINT {q(name)} {definition}")
        cursor.execute(f"DROP TABLE {q(old)}")


def _set_aside(
    cursor: CursorWrapper,
    connection: BaseDatabaseWrapper,
    table: str,
    renamed_to: str,
    indexes: list[tuple[str, str, str | None, str | None]],
    suffix: str,
) -> None:
    """Rename `table` to `renamed_to` and its indexes (with the constraints
    they back) with `suffix`, freeing their names for the table made in its place."""
    q = connection.ops.quote_name
    cursor.execute(f"ALTER TABLE {q(table)} RENAME TO {q(renamed_to)}")
    for index, _, constraint, _ in indexes:
        renamed = _name(index, suffix)
        if constraint:
            cursor.execute(
                f"ALTER TABLE {q(renamed_to)} RENAME CONSTRAINT {q(constraint)} TO {q(renamed)}"
            )
        else:
            cursor.execute(f"ALTER INDEX {q(index)} RENAME TO {q(renamed)}")


def _refuse_referenced(cursor: CursorWrapper, table: str) -> None:
    cursor.execute(
        "SELECT conname, conrelid::regclass::text FROM pg_constraint"
        " WHERE confrelid = %s::regclass AND contype = 'f'",
        [table],
    )
    referencing = cursor.fetchall()
    if referencing:
        # Detaching a partition would have to read every referencing row.
        raise ValueError(f"{table}: foreign keys name it ({referencing}); drop them first")


def _indexes(cursor: CursorWrapper, table: str) -> list[tuple[str, str, str | None, str | None]]:
    """Each index of `table`: name, definition, and the constraint it backs, with its definition."""
    cursor.execute(
        "SELECT ic.relname, pg_get_indexdef(x.indexrelid), con.conname,"
        " pg_get_constraintdef(con.oid)"
        " FROM pg_index AS x JOIN pg_class AS ic ON ic.oid = x.indexrelid"
        " LEFT JOIN pg_constraint AS con ON con.conindid = x.indexrelid"
        "  AND con.conrelid = x.indrelid"
        " WHERE x.indrelid = %s::regclass ORDER BY ic.relname",
        [table],
    )
    return cursor.fetchall()


def _foreign_keys(cursor: CursorWrapper, table: str) -> list[tuple[str, str]]:
    cursor.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE conrelid = %s::regclass AND contype = 'f' ORDER BY conname",
        [table],
    )
    return cursor.fetchall()


def _owned_sequences(cursor: CursorWrapper, table: str) -> list[tuple[str, str]]:
    """(column, sequence) for each sequence a column of `table` owns, identities aside."""
    cursor.execute(
        "SELECT a.attname, s.relname FROM pg_depend AS d"
        " JOIN pg_class AS s ON s.oid = d.objid AND s.relkind = 'S'"
        " JOIN pg_attribute AS a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid"
        " WHERE d.refobjid = %s::regclass AND d.deptype = 'a'",
        [table],
    )
    return cursor.fetchall()


def _primary_key_replaced(
    connection: BaseDatabaseWrapper, table: str, columns: tuple[str, ...]
) -> None:
    q = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conname, array_agg(a.attname ORDER BY k.ordinality)"
            " FROM pg_constraint AS c, unnest(c.conkey) WITH ORDINALITY AS k (attnum, ordinality)"
            " JOIN pg_attribute AS a ON a.attnum = k.attnum"
            " WHERE c.conrelid = %s::regclass AND a.attrelid = c.conrelid AND c.contype = 'p'"
            " GROUP BY conname",
            [table],
        )
        name, current = cursor.fetchone()
        if tuple(current) == columns:
            return
        building = _name(table, "_pkey_new")
        cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {q(building)}")  # a failed try's
        cursor.execute(
            f"CREATE UNIQUE INDEX CONCURRENTLY {q(building)} ON {q(table)}"
            f" ({', '.join(q(c) for c in columns)})"
        )
    with _locking(connection) as cursor:
        cursor.execute(f"ALTER TABLE {q(table)} DROP CONSTRAINT {q(name)}")
        cursor.execute(
            f"ALTER TABLE {q(table)} ADD CONSTRAINT {q(name)} PRIMARY KEY USING INDEX {q(building)}"
        )


class _locking:
    """A transaction whose locks are waited for LOCK_TIMEOUT at most. A
    change another process made first (two beats make the same partition,
    or drop it) ends it as `RaceLost`."""

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.connection = connection
        self.atomic = transaction.atomic(using=connection.alias)

    def __enter__(self) -> CursorWrapper:
        self.atomic.__enter__()
        self.cursor = self.connection.cursor()
        self.cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
        return self.cursor

    def __exit__(self, kind: object, error: BaseException | None, trace: object) -> None:
        self.cursor.close()
        self.atomic.__exit__(kind, error, trace)  # type: ignore[arg-type]
        if isinstance(error, OperationalError) and _sqlstate(error) == "55P03":
            raise LockUnavailable(str(error)) from error
        # duplicate_table, invalid_object_definition (an overlap),
        # undefined_table: the partition made, or gone, already.
        if isinstance(error, DatabaseError) and _sqlstate(error) in ("42P07", "42P17", "42P01"):
            raise RaceLost(str(error)) from error


def _sqlstate(error: DatabaseError) -> str | None:
    return getattr(error.__cause__, "sqlstate", None)


def _overlaps(partition: Partition, lower: str, upper: str) -> bool:
    if partition.is_default:
        return False
    return (partition.lower is None or partition.lower < upper) and (
        partition.upper is None or partition.upper > lower
    )


def _partition(name: str, bound: str) -> Partition:
    if bound == "DEFAULT":
        return Partition(name, None, None, is_default=True)
    match = _RANGE.fullmatch(bound)
    if not match:
        raise ValueError(f"{name}: not a range partition ({bound})")
    return Partition(name, _value(match.group(1)), _value(match.group(2)))


def _value(text: str) -> str | None:
    if text in ("MINVALUE", "MAXVALUE"):
        return None
    return text[1:-1].replace("''", "'")


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _name(base: str, suffix: str) -> str:
    """`base` + `suffix` within PostgreSQL's 63 characters."""
    return base[: 63 - len(suffix)] + suffix


def _partition_key(connection: BaseDatabaseWrapper, table: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.attname FROM pg_partitioned_table AS p JOIN pg_attribute AS a"
            " ON a.attrelid = p.partrelid AND a.attnum = p.partattrs[0]"
            " WHERE p.partrelid = %s::regclass",
            [table],
        )
        (key,) = cursor.fetchone()
    return str(key)


def _storage_clause(
    connection: BaseDatabaseWrapper, table: str, existing: list[Partition] | None = None
) -> str:
    """` WITH (…)`: the storage parameters of the newest ranged partition (or
    of the table before it was converted), which a partitioned table cannot
    carry itself. `existing`: its partitions, when the caller has read them."""
    if existing is None:
        existing = partitions(connection, table)
    ranged = [p for p in existing if not p.is_default]
    source = ranged[-1].name if ranged else table
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE oid = to_regclass(%s)", [source])
        row = cursor.fetchone()
    options = row[0] if row and row[0] else []
    return f" WITH ({', '.join(options)})" if options else ""
