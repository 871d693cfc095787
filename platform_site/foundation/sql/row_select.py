"""Model instances from the columns of a hand-written SELECT, converted as
the ORM converts them (JSON, datetimes on SQLite...): for a hot read that
joins what several ORM queries would fetch, without their compilation."""

from collections.abc import Sequence
from functools import cache
from typing import Any

from django.db import connection
from django.db.models import Model

Converter = Any


@cache
def _columns(
    model: type[Model], vendor: str
) -> tuple[tuple[str, ...], tuple[tuple[list[Converter], Any], ...]]:
    converters = []
    for field in model._meta.concrete_fields:
        column = field.get_col(model._meta.db_table)
        converters.append(
            (connection.ops.get_db_converters(column) + field.get_db_converters(connection), column)  # type: ignore[attr-defined]
        )
    return tuple(field.attname for field in model._meta.concrete_fields), tuple(converters)


def select_list(model: type[Model], alias: str) -> str:
    """The model's columns, prefixed by the table's alias in the query, in
    the order instance_from_row reads them."""
    quote = connection.ops.quote_name
    return ", ".join(f"{alias}.{quote(field.column)}" for field in model._meta.concrete_fields)


def column_count(model: type[Model]) -> int:
    return len(model._meta.concrete_fields)


def instance_from_row(model: type[Model], values: Sequence[Any]) -> Model:
    """The instance whose columns (select_list's order) are `values`."""
    attnames, converters = _columns(model, connection.vendor)
    converted = []
    for value, (field_converters, column) in zip(values, converters, strict=True):
        for converter in field_converters:
            value = converter(value, column, connection)
        converted.append(value)
    return model.from_db(connection.alias, attnames, converted)
