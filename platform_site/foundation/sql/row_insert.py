"""Rows of the hot writes (an event, a chat message) written by SQL built
once per model: they skip the ORM's query compiler, which costs more CPU
than the rest of their INSERT. Field values are prepared exactly as save()
prepares them (pre_save, get_db_prep_save). No save signals are sent: the
models written this way have no receivers."""

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from functools import cache
from typing import Any

from django.db import connection, transaction
from django.db.models import Field, Model

Statement = tuple[str, list[Any]]

# Set while a keyed create runs on PostgreSQL (platform_site/api/idempotency.py): it may
# hold rows_write's statements back, answering True, to write them with the
# answer it keeps, in one statement.
rows_holder: ContextVar[Callable[[Sequence[Statement]], bool] | None] = ContextVar(
    "rows_holder", default=None
)


@cache
def _insert_sql(model: type[Model], vendor: str) -> tuple[str, tuple[Field, ...]]:
    meta = model._meta
    fields = tuple(meta.local_concrete_fields)
    quote = connection.ops.quote_name
    columns = ", ".join(quote(field.column) for field in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    return f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({placeholders})", fields


def insert_statement(instance: Model) -> Statement:
    """The INSERT of a new instance (its primary key set by its field's
    default), which it takes as stored: its auto_now fields are set."""
    sql, fields = _insert_sql(type(instance), connection.vendor)
    values = [
        field.get_db_prep_save(field.pre_save(instance, True), connection) for field in fields
    ]
    instance._state.adding = False
    instance._state.db = connection.alias
    return sql, values


def update_statement(model: type[Model], pk: Any, **values: Any) -> Statement:
    """UPDATE of some fields (attribute names) of one row."""
    meta = model._meta
    quote = connection.ops.quote_name
    fields = [field for field in meta.concrete_fields if field.attname in values]
    assignments = ", ".join(f"{quote(field.column)} = %s" for field in fields)
    params = [field.get_db_prep_save(values[field.attname], connection) for field in fields]
    key = meta.pk
    assert key is not None and len(fields) == len(values)
    sql = f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(key.column)} = %s"
    return sql, [*params, key.get_db_prep_value(pk, connection)]


def row_insert(instance: Model) -> None:
    """INSERT `instance` in the caller's transaction, or alone, atomic by itself."""
    rows_write(insert_statement(instance))


def rows_write(*statements: Statement) -> None:
    """INSERTs and UPDATEs that stand or fall together. On PostgreSQL one
    statement (one_statement), atomic by itself: one round trip, where a
    transaction around them would cost three more (BEGIN, each statement's,
    COMMIT). Elsewhere, in a transaction. A keyed create may hold them
    (rows_holder) and write them later, with its kept answer."""
    holder = rows_holder.get()
    if holder is not None and holder(statements):
        return
    if connection.vendor == "postgresql" or len(statements) == 1:
        with connection.cursor() as cursor:
            cursor.execute(*one_statement(statements))
        return
    with transaction.atomic(), connection.cursor() as cursor:
        for sql, values in statements:
            cursor.execute(sql, values)


def one_statement(statements: Sequence[Statement]) -> Statement:
    """PostgreSQL: the statements as one, all but the last as data-modifying
    WITH clauses. Foreign keys between the rows hold: they are checked when
    the statement ends."""
    *first, (last_sql, last_params) = statements
    if not first:
        return last_sql, last_params
    sql = "WITH " + ", ".join(f"w{n} AS ({text})" for n, (text, _) in enumerate(first))
    params: list[Any] = []
    for _, values in first:
        params += values
    return f"{sql} {last_sql}", [*params, *last_params]
