"""The one way a selector finds an object named by an id in a request."""

from typing import TypeVar

from django.db.models import Model, QuerySet

from platform_site.api.ids import is_id
from platform_site.domain_errors import MalformedId, NotFound

ModelT = TypeVar("ModelT", bound=Model)


def object_get(queryset: QuerySet[ModelT], *, object_id: str, prefix: str, noun: str) -> ModelT:
    """The object of `queryset` (already narrowed to what the caller may see)
    with id `object_id`. An id of the wrong form is MalformedId without a
    query; one of another tenant is NotFound, as is one that never was, so
    an answer tells nothing of others' objects."""
    if not is_id(object_id, prefix):
        article = "an" if noun[0] in "aeiou" else "a"
        raise MalformedId(f"{object_id[:40]!r} is not {article} {noun} id")
    found = queryset.filter(pk=object_id).first()
    if found is None:
        raise NotFound(f"{noun.capitalize()} {object_id!r} not found")
    return found
