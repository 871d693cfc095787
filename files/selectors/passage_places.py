"""Passages named by their place, (file id, position): one condition of
row values for any number of them. Built through the ORM as an OR of
(file, position) pairs, the condition cost more to build than its
statement took to run (a search names 10 to 50 places)."""

from collections.abc import Collection
from typing import Any


def places_condition(places: Collection[tuple[str, int]]) -> tuple[str, list[Any]]:
    """`(file_id, position) IN (VALUES …)` and its parameters; `places` must not be empty."""
    rows = ", ".join(["(%s, %s)"] * len(places))
    return (
        f"(file_id, position) IN (VALUES {rows})",
        [value for place in places for value in place],
    )
