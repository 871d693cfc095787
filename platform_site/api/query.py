from collections.abc import Mapping
from typing import Any, TypeVar

from django.db.models import Model, QuerySet
from django_filters import FilterSet
from rest_framework import serializers

from platform_site.api.errors import InvalidQuery
from platform_site.api.exception_handler import describe_validation_error
from platform_site.domain_errors import InvalidFilter

ModelT = TypeVar("ModelT", bound=Model)


def validate_query(serializer_class: type[serializers.Serializer], query: Mapping[str, Any]) -> Any:
    """Validated query parameters, or InvalidQuery saying which one is wrong.
    Unknown parameters are ignored: clients send optional ones a server may not know."""
    values = {name: query[name] for name in serializer_class().fields.keys() if name in query}
    serializer = serializer_class(data=values)
    if not serializer.is_valid():
        raise InvalidQuery("; ".join(describe_validation_error(serializer.errors)))
    return serializer.validated_data


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
