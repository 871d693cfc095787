"""The one way a selector finds an object named by an id in a request."""

from typing import Any, TypeVar

from django.db.models import Manager, Model, QuerySet

from platform_site.foundation.domain_errors import MalformedId, NotFound
from platform_site.foundation.ids import is_id

ModelT = TypeVar("ModelT", bound=Model)


def id_form_check(object_id: str, *, prefix: str, noun: str, shown: int = 40) -> None:
    """MalformedId unless `object_id` has the form of an id of its kind, its
    first `shown` characters quoted in the refusal."""
    if not is_id(object_id, prefix):
        article = "an" if noun[0] in "aeiou" else "a"
        raise MalformedId(f"{object_id[:shown]!r} is not {article} {noun} id")


def object_not_found(noun: str, object_id: str) -> NotFound:
    return NotFound(f"{noun.capitalize()} {object_id!r} not found")


def object_get(
    queryset: QuerySet[ModelT] | Manager[ModelT],
    *,
    object_id: str,
    prefix: str,
    noun: str,
    **scope: Any,
) -> ModelT:
    """The object of `queryset`, narrowed by `scope` to what the caller may
    see (`bot=bot`; one filter, as one clone of the query, on the hot reads),
    with id `object_id`. An id of the wrong form is MalformedId without a
    query; one of another tenant is NotFound, as is one that never was, so
    an answer tells nothing of others' objects."""
    id_form_check(object_id, prefix=prefix, noun=noun)
    found = queryset.filter(pk=object_id, **scope).first()
    if found is None:
        raise object_not_found(noun, object_id)
    return found
