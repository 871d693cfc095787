from collections.abc import Mapping
from typing import Any, TypeVar

from django.db.models import Model, QuerySet
from django_filters import FilterSet

from platform_site.foundation.domain_errors import InvalidFilter

ModelT = TypeVar("ModelT", bound=Model)


def filter_query(
    filterset_class: type[FilterSet], query: Mapping[str, Any], queryset: QuerySet[ModelT]
) -> tuple[QuerySet[ModelT], dict[str, Any]]:
    """`queryset` narrowed by a django-filter FilterSet, with the filters it
    applied, or InvalidFilter naming each malformed parameter (selectors
    filter with it: the API answers it as InvalidQuery)."""
    filterset = filterset_class(data=dict(query.items()), queryset=queryset)
    if not filterset.is_valid():
        raise InvalidFilter(
            "; ".join(
                f"{name}: {message}"
                for name, messages in filterset.errors.items()
                for message in messages
            )
        )
    cleaned = filterset.form.cleaned_data
    applied = {name: value for name, value in cleaned.items() if value not in ("", None)}
    return filterset.qs, applied
