"""Filtering on `tags`, a JSON object of strings, by any key; the earlier
object a get-or-create finds by its tags; tags changed by an update.

Django's key transforms read a key made of digits as an array index, so
`tags[0]=v` would match nothing; this expression treats every key as a key."""

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import BooleanField, Expression, F, Model, Q, QuerySet
from django.db.models.sql.compiler import SQLCompiler
from django.http import QueryDict

from platform_site.foundation.domain_errors import InvalidFilter, InvalidValue

ModelT = TypeVar("ModelT", bound=Model)

TAGS_MAX_COUNT = 50


class TagEquals(Expression):
    conditional = True
    output_field = BooleanField()

    def __init__(self, field: str, key: str, value: str):
        super().__init__()
        self.column: Any = F(field)
        self.key = key
        self.value = value

    def get_source_expressions(self) -> list[Any]:
        return [self.column]

    def set_source_expressions(self, exprs: Sequence[Any]) -> None:
        (self.column,) = exprs

    def resolve_expression(self, *args: Any, **kwargs: Any) -> "TagEquals":
        clone = self.copy()
        clone.column = self.column.resolve_expression(*args, **kwargs)
        return clone

    def as_sql(
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any
    ) -> tuple[str, list[Any]]:
        column, params = compiler.compile(self.column)
        return (
            f"EXISTS (SELECT 1 FROM json_each({column}) AS tag"
            " WHERE tag.key = %s AND tag.type = 'text' AND tag.value = %s)",
            [*params, self.key, self.value],
        )

    def as_postgresql(
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any
    ) -> tuple[str, list[Any]]:
        column, params = compiler.compile(self.column)
        # Containment, so a GIN index on the column can serve it.
        return f"{column} @> jsonb_build_object(%s::text, %s::text)", [
            *params,
            self.key,
            self.value,
        ]


# `tags[k]=v`, and `tags.k=v` as the official clients write it (qs with
# `allowDots`); in the dotted form the key is all that follows `tags.`.
_TAG_PARAM = re.compile(r"tags(?:\[(?P<key>[^\]]+)\]|\.(?P<dotted_key>.+))")


def tag_filters(query: QueryDict) -> dict[str, str]:
    """`tags[<key>]=<value>` (or `tags.<key>=<value>`) parameters as a
    mapping; each key at most once."""
    tags: dict[str, str] = {}
    for name, values in query.lists():
        match = _TAG_PARAM.fullmatch(name)
        if match is None:
            continue
        key = match["key"] or match["dotted_key"]
        if len(values) != 1:
            raise InvalidFilter(f"{name} is given more than once")
        if key in tags:
            raise InvalidFilter(f"{name} is given more than once (as tags[{key}] and tags.{key})")
        tags[key] = values[0]
    return tags


def tagged(queryset: QuerySet[ModelT], tags: Mapping[str, str]) -> QuerySet[ModelT]:
    """The rows of `queryset` whose `tags` hold every key of `tags` with its value."""
    for key, value in tags.items():
        queryset = queryset.filter(TagEquals("tags", key, value))
    return queryset


@dataclass(frozen=True)
class TagMatch:
    """Which earlier object a get-or-create answers (its `discriminateByTags`):
    one whose tags named in `keys` each have the value they have in `tags`,
    or are absent from both; without `keys`, one whose tags are `tags`."""

    tags: Mapping[str, str]
    keys: Sequence[str] | None

    def first(self, queryset: QuerySet[ModelT]) -> ModelT | None:
        """The first row of `queryset` (by id) whose `tags` match; None when
        there is no tag to match on (nothing then tells one object from
        another: a get-or-create makes a new one)."""
        if not (self.tags if self.keys is None else self.keys):
            return None
        # The query narrows to the tags that must be there; matches() decides.
        wanted = {k: v for k, v in self.tags.items() if self.keys is None or k in self.keys}
        for row in tagged(queryset, wanted).order_by("id"):
            if self.matches(row.tags):  # type: ignore[attr-defined]
                return row
        return None

    def matches(self, candidate: Mapping[str, str]) -> bool:
        if self.keys is None:
            return candidate == self.tags
        return all(candidate.get(key) == self.tags.get(key) for key in self.keys)


def tags_changed(
    current: Mapping[str, str], changes: Mapping[str, str | None], *, field: str
) -> dict[str, str]:
    """`current` with `changes` made: a string sets its key, None removes it.
    InvalidValue when that leaves more tags than an object may carry."""
    changed = {**current, **changes}
    kept = {key: value for key, value in changed.items() if value is not None}
    if len(kept) > TAGS_MAX_COUNT:
        raise InvalidValue(f"{field}: At most {TAGS_MAX_COUNT} tags.")
    return kept


@dataclass(frozen=True)
class TagCondition:
    """What a filter asks of one tag: its value one of `any_of` (when there
    are any), and none of `none_of` (a file without the tag has none)."""

    key: str
    any_of: tuple[str, ...] = ()
    none_of: tuple[str, ...] = ()

    def q(self) -> Q:
        condition = Q()
        if self.any_of:
            condition &= _any_tag(self.key, self.any_of)
        if self.none_of:
            condition &= ~_any_tag(self.key, self.none_of)
        return condition


def _any_tag(key: str, values: Sequence[str]) -> Q:
    found = Q()
    for value in values:
        found |= Q(TagEquals("tags", key, value))
    return found


# The forms a tags filter comes in: `tags.<k>` and `tags.<k>.not` (the
# official client: qs with allowDots, arrays as repeated parameters), and
# `tags[<k>]`, `tags[<k>][not]`, each optionally indexed `[<n>]` (qs's
# default form, which the hosted docs show).
_TAG_CONDITION_PARAM = re.compile(
    r"tags(?:\.(?P<dotted>.+?)(?P<dotted_not>\.not)?"
    r"|\[(?P<key>[^\]]+)\](?P<not>\[not\])?(?:\[\d+\])?)"
)


def tag_conditions(query: QueryDict) -> list[TagCondition]:
    """The tag filter of a search: `tags` as a JSON object (of strings,
    arrays of strings meaning any of them, and `{"not": ...}` for values to
    exclude), or as the parameters _TAG_CONDITION_PARAM reads, where a
    repeated key means any of its values. InvalidFilter on anything else."""
    wanted: dict[str, list[str]] = {}
    excluded: dict[str, list[str]] = {}
    if "tags" in query:
        _tags_json(query.getlist("tags"), wanted, excluded)
    for name, values in query.lists():
        match = _TAG_CONDITION_PARAM.fullmatch(name)
        if match is None:
            continue
        key = match["dotted"] or match["key"]
        negated = bool(match["dotted_not"] or match["not"])
        (excluded if negated else wanted).setdefault(key, []).extend(values)
    keys = list(dict.fromkeys([*wanted, *excluded]))
    if len(keys) > TAGS_MAX_COUNT:
        raise InvalidFilter(f"tags: at most {TAGS_MAX_COUNT} tags")
    return [
        TagCondition(key, tuple(wanted.get(key, ())), tuple(excluded.get(key, ()))) for key in keys
    ]


def _tags_json(
    raws: list[str], wanted: dict[str, list[str]], excluded: dict[str, list[str]]
) -> None:
    if len(raws) != 1:
        raise InvalidFilter("tags is given more than once")
    try:
        tags = json.loads(raws[0])
    except ValueError:
        raise InvalidFilter("tags must be a JSON object (URL-encoded)") from None
    if not isinstance(tags, dict):
        raise InvalidFilter("tags must be a JSON object (URL-encoded)")
    for key, value in tags.items():
        if isinstance(value, dict):
            if set(value) != {"not"}:
                raise InvalidFilter(f'tags: {key} may be a string, strings, or {{"not": ...}}')
            excluded.setdefault(key, []).extend(_tag_values(key, value["not"]))
        else:
            wanted.setdefault(key, []).extend(_tag_values(key, value))


def _tag_values(key: str, value: Any) -> list[str]:
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(item, str) for item in values):
        raise InvalidFilter(f"tags: {key} must be a string or an array of strings")
    return values
