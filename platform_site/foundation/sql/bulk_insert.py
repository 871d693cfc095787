"""Inserting many rows of a model at once."""

from collections.abc import Sequence

from django.db import connection
from django.db.models import Model


def rows_insert(
    model: type[Model], fields: Sequence[str], rows: Sequence[Sequence[object]]
) -> None:
    """Insert `rows`, each the values of `fields` (attribute names, `bot_id`
    for a foreign key) in order, inside the caller's transaction.

    On PostgreSQL with COPY: Django's bulk_create sends the rows as arrays
    that psycopg builds in Python, value by value, which costs several times
    what COPY does (bench/indexing.py for passages, bench/profile_delivery.py
    for delivery attempts). Elsewhere with bulk_create."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        model._default_manager.bulk_create(
            (model(**dict(zip(fields, row, strict=True))) for row in rows), batch_size=1000
        )
        return
    meta = model._meta
    quote = connection.ops.quote_name
    column_of = {field.attname: field.column for field in meta.concrete_fields}
    columns = ", ".join(quote(column_of[name]) for name in fields)
    statement = f"COPY {quote(meta.db_table)} ({columns}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row(row)
