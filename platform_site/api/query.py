from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

from platform_site.api.errors import InvalidQuery
from platform_site.api.exception_handler import describe_validation_error


def validate_query(serializer_class: type[serializers.Serializer], query: Mapping[str, Any]) -> Any:
    """Validated query parameters, or InvalidQuery saying which one is wrong.
    Unknown parameters are ignored: clients send optional ones a server may not know."""
    values = {name: query[name] for name in serializer_class().fields.keys() if name in query}
    serializer = serializer_class(data=values)
    if not serializer.is_valid():
        raise InvalidQuery("; ".join(describe_validation_error(serializer.errors)))
    return serializer.validated_data
