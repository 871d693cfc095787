import copy
from collections.abc import Mapping
from typing import Any, ClassVar

from rest_framework import serializers
from rest_framework.exceptions import ValidationError


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _fresh(field: serializers.Field) -> serializers.Field:
    """A field of a new serializer instance, from its class's declaration.

    DRF deep-copies every declared field for every instance, which re-runs
    each field's __init__ (validators, messages): most of the cost of
    building a serializer, once per request. A plain field is never changed
    after its __init__ but by bind(), which sets attributes of its own, so a
    shallow copy does; what holds other fields (a nested serializer, a list's
    child) is deep-copied as DRF does."""
    if isinstance(field, serializers.BaseSerializer) or hasattr(field, "child"):
        return copy.deepcopy(field)
    return copy.copy(field)


class ClosedSerializer(serializers.Serializer):
    """A request schema that refuses fields it does not declare, takes
    exactly one of the fields in `exactly_one_of` when it names some, and at
    most one of those in `at_most_one_of` (the OpenAPI document states all
    three: platform_site.api.schema)."""

    exactly_one_of: ClassVar[tuple[str, ...]] = ()
    at_most_one_of: ClassVar[tuple[str, ...]] = ()
    # JSON Schema keywords of a field's schema that its validation (a
    # `validate_<field>` method) implies but drf-spectacular cannot see.
    schema_constraints: ClassVar[dict[str, dict[str, Any]]] = {}

    def get_fields(self) -> dict[str, serializers.Field]:
        return {name: _fresh(field) for name, field in self._declared_fields.items()}

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise ValidationError(
                {"non_field_errors": [f"Expected a JSON object, got {json_type(data)}."]}
            )
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            raise ValidationError({name: ["Unknown field."] for name in unknown})
        given = [name for name in self.at_most_one_of if name in data]
        if len(given) > 1:
            raise ValidationError(
                {"non_field_errors": [f"Give at most one of {' or '.join(given)}."]}
            )
        values = super().to_internal_value(data)
        if self.exactly_one_of and sum(name in values for name in self.exactly_one_of) != 1:
            raise ValidationError(
                {"non_field_errors": [f"Give exactly one of {' or '.join(self.exactly_one_of)}."]}
            )
        return values
