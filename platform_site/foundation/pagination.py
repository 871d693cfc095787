"""Keyset pagination with an opaque, signed `nextToken`.

A page is `ordering > last position`, over an ordering whose last field is
unique, so a page's cost does not grow with its depth and rows added while a
client pages are neither shown twice nor make it skip one. The token is the
last row's position, signed with a salt naming the list (and its sort), so a
token tampered with or taken from another list is refused: InvalidFilter,
which the API answers as InvalidQuery (selectors page, so the refusal is a
domain error, and so is a page size out of range).
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.core import signing
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from platform_site.foundation.domain_errors import InvalidFilter

ModelT = TypeVar("ModelT", bound=models.Model)
# A page's items: model instances, or the strings of a list of values.
ItemT = TypeVar("ItemT")


@dataclass(frozen=True)
class PageRequest:
    size: int
    token: str | None


@dataclass(frozen=True)
class Page(Generic[ItemT]):
    items: list[ItemT]
    next_token: str | None

    def meta(self) -> dict[str, str]:
        return {"nextToken": self.next_token} if self.next_token else {}

    def json(self, key: str, present: Callable[[ItemT], Any]) -> dict[str, Any]:
        """The answer of a list endpoint: the items as `key`, each as
        `present` shows it, and `meta` holding the nextToken of the next page."""
        return {key: [present(item) for item in self.items], "meta": self.meta()}


def _parse_size(name: str, raw: str) -> int:
    # Plain ASCII digits only: int() would also take "1_0" and non-Latin digits.
    size = int(raw) if raw.isascii() and raw.isdigit() else 0
    if not 1 <= size <= settings.PAGE_SIZE_MAX:
        raise InvalidFilter(f"{name} must be an integer from 1 to {settings.PAGE_SIZE_MAX}")
    return size


def page_request(query: Mapping[str, str], *, size_param: str | None = None) -> PageRequest:
    """Read `nextToken` and the page size: `size_param` (such as `limit`) when
    the endpoint names one and the client sends it, else `pageSize`."""
    name = size_param if size_param and size_param in query else "pageSize"
    size = _parse_size(name, query[name]) if name in query else settings.PAGE_SIZE_DEFAULT
    # An empty nextToken is the first page: clients send `nextToken=` for it.
    token = query.get("nextToken") or None
    return PageRequest(size=size, token=token)


def _encode(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def keyset_signer(list_name: str, ordering: Sequence[str]) -> signing.Signer:
    """What signs and checks the nextTokens of a list in an ordering: a
    token of one list or ordering is refused by any other."""
    return signing.Signer(salt=f"page:{list_name}:{','.join(ordering)}")


def paginate(
    queryset: models.QuerySet[ModelT],
    *,
    ordering: Sequence[str],
    list_name: str,
    request: PageRequest,
) -> Page[ModelT]:
    """One keyset page of `queryset` in `ordering` (its last field unique)."""
    if not ordering:
        raise ValueError("keyset pagination needs an ordering")
    model = queryset.model
    fields = [name.lstrip("-") for name in ordering]
    signer = keyset_signer(list_name, ordering)
    queryset = queryset.order_by(*ordering)
    if request.token:
        position = _decode_token(model, fields, request.token, signer)
        queryset = queryset.filter(_after(ordering, position))
    rows = list(queryset[: request.size + 1])
    if len(rows) <= request.size:
        return Page(items=rows, next_token=None)
    rows = rows[: request.size]
    last = rows[-1]
    position = [_encode(getattr(last, _field(model, f).attname)) for f in fields]
    return Page(items=rows, next_token=signer.sign_object(position))


def _field(model: type[models.Model], name: str) -> models.Field:
    field = model._meta.get_field(name)
    if not isinstance(field, models.Field):
        raise TypeError(f"{name} is not a concrete field of {model.__name__}")
    return field


def _decode_token(
    model: type[models.Model], fields: list[str], token: str, signer: signing.Signer
) -> list[Any]:
    try:
        position = signer.unsign_object(token)
    except signing.BadSignature:
        raise InvalidFilter("nextToken is invalid or belongs to another list") from None
    if not isinstance(position, list) or len(position) != len(fields):
        raise InvalidFilter("nextToken is invalid or belongs to another list")
    try:
        return [_field(model, f).to_python(v) for f, v in zip(fields, position, strict=True)]
    except (ValidationError, TypeError, ValueError):
        raise InvalidFilter("nextToken is invalid or belongs to another list") from None


def _after(ordering: Sequence[str], position: list[Any]) -> Q:
    """Rows strictly after `position`: (a > x) or (a = x and b > y) ..."""
    condition = Q()
    equal_prefix: dict[str, Any] = {}
    for name, value in zip(ordering, position, strict=True):
        field = name.lstrip("-")
        lookup = "lt" if name.startswith("-") else "gt"
        condition |= Q(**equal_prefix, **{f"{field}__{lookup}": value})
        equal_prefix[field] = value
    return condition
