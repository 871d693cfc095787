from collections.abc import Mapping
from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import ValidationError


class ClosedSerializer(serializers.Serializer):
    """A request schema that refuses fields it does not declare."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise ValidationError(
                {"non_field_errors": [f"Expected a JSON object, got {type(data).__name__}."]}
            )
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            raise ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)
