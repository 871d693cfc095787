"""Prefixed ULID identifiers: `bot_01J…`, `evt_01J…`; 28 to 36 characters."""

import re
from datetime import datetime
from typing import Any

from django.db import models
from ulid import ULID

ULID_LENGTH = 26
ID_MIN_LENGTH = 28
ID_MAX_LENGTH = 36
_ULID_RE = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def new_id(prefix: str) -> str:
    return f"{prefix}_{ULID()}"


def new_id_at(prefix: str, moment: datetime) -> str:
    """A new id whose ULID carries `moment` rather than now: for an object
    made ahead of the time it appears at, so that it sorts there."""
    return f"{prefix}_{ULID.from_datetime(moment)}"


def id_floor(prefix: str, moment: datetime) -> str:
    """The smallest id of this kind made at or after `moment`. Ids are ULIDs,
    so `id >= id_floor(...)` selects rows by creation time over an index on
    the id, where a filter on the creation column would read every row."""
    milliseconds = int(moment.timestamp() * 1000)
    return f"{prefix}_{ULID.from_bytes(milliseconds.to_bytes(6, 'big') + bytes(10))}"


def is_id(value: object, prefix: str) -> bool:
    """Whether `value` can be an id of the kind that `prefix` names."""
    if not isinstance(value, str) or not value.startswith(prefix + "_"):
        return False
    return _ULID_RE.fullmatch(value, len(prefix) + 1) is not None


class PrefixedIdField(models.CharField):
    """Primary key made of a prefix and a ULID, generated when the row is made."""

    def __init__(self, prefix: str = "", *args: Any, **kwargs: Any) -> None:
        self.prefix = prefix
        kwargs.setdefault("max_length", ID_MAX_LENGTH)
        kwargs.setdefault("primary_key", True)
        kwargs.setdefault("editable", False)
        kwargs["default"] = self.generate
        super().__init__(*args, **kwargs)

    def generate(self) -> str:
        return new_id(self.prefix)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        kwargs["prefix"] = self.prefix
        # The default follows from the prefix; a bound method cannot be serialised.
        kwargs.pop("default", None)
        return name, path, args, kwargs
