"""Serializer fields that take JSON types as they are: DRF's own fields coerce
(123 becomes "123", "true" becomes True), which the contract calls a wrong type."""

import re
from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import URLValidator
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from platform_site.foundation.tags import TAGS_MAX_COUNT


def format_timestamp(value: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and a Z: 2026-11-22T10:00:00.000Z."""
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


class StrictCharField(serializers.CharField):
    default_error_messages = {"invalid": "Must be a string."}

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    default_error_messages = {"invalid": "Must be an integer."}

    def to_internal_value(self, data: Any) -> int:
        # JSON has one number type: 1000.0 is the integer 1000 to a JavaScript client.
        if isinstance(data, float) and data.is_integer():
            data = int(data)
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictNumberField(serializers.FloatField):
    default_error_messages = {"invalid": "Must be a number."}

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return super().to_internal_value(data)


# Stored JSON: the component is added by platform_site.api.schema.
@extend_schema_field({"$ref": "#/components/schemas/JsonObject"})
class JSONObjectField(serializers.Field):
    default_error_messages = {"invalid": "Must be a JSON object."}

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            self.fail("invalid")
        return data

    def to_representation(self, value: dict[str, Any]) -> dict[str, Any]:
        return value


class StrictChoiceField(serializers.ChoiceField):
    """A string among `choices`; the message lists them rather than echoing
    Python's rendering of whatever was sent."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str) or data not in self.choice_strings_to_values:
            raise serializers.ValidationError(
                f"Must be one of: {', '.join(self.choice_strings_to_values)}."
            )
        return self.choice_strings_to_values[data]


class StrictBooleanField(serializers.BooleanField):
    default_error_messages = {"invalid": "Must be true or false."}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


@extend_schema_field(OpenApiTypes.DATETIME)
class TimestampField(serializers.Field):
    """An ISO 8601 date and time with a timezone, as an aware UTC datetime."""

    default_error_messages = {
        "invalid": "Must be an ISO 8601 date and time, such as 2026-11-22T10:00:00.000Z.",
        "naive": "Must carry a timezone, such as Z or +02:00.",
        "range": "Is out of the supported range of dates.",
    }

    def to_internal_value(self, data: Any) -> datetime:
        if not isinstance(data, str):
            self.fail("invalid")
        try:
            moment = datetime.fromisoformat(data)
        except ValueError:
            self.fail("invalid")
        if moment.tzinfo is None:
            self.fail("naive")
        try:
            return moment.astimezone(UTC)
        except OverflowError:
            self.fail("range")

    def to_representation(self, value: datetime) -> str:
        return format_timestamp(value)


TAG_KEY_MAX_LENGTH = 100
TAG_VALUE_MAX_LENGTH = 500


@extend_schema_field(
    {
        "type": "object",
        "maxProperties": TAGS_MAX_COUNT,
        "propertyNames": {"minLength": 1, "maxLength": TAG_KEY_MAX_LENGTH},
        "additionalProperties": {"type": "string", "maxLength": TAG_VALUE_MAX_LENGTH},
    }
)
class TagsField(serializers.Field):
    """An object of string values, as bots, files and messages carry."""

    def to_internal_value(self, data: Any) -> dict[str, str]:
        return _tags_valid(data)

    def to_representation(self, value: dict[str, str]) -> dict[str, str]:
        return value


def _tags_valid(data: Any) -> dict[str, str]:
    if not isinstance(data, dict):
        raise serializers.ValidationError("Must be an object of strings.")
    if len(data) > TAGS_MAX_COUNT:
        raise serializers.ValidationError(f"At most {TAGS_MAX_COUNT} tags.")
    for key, value in data.items():
        if not 1 <= len(key) <= TAG_KEY_MAX_LENGTH:
            raise serializers.ValidationError(
                f"Tag names are 1 to {TAG_KEY_MAX_LENGTH} characters."
            )
        if not isinstance(value, str):
            raise serializers.ValidationError(f"Tag {key!r}: must be a string.")
        if len(value) > TAG_VALUE_MAX_LENGTH:
            raise serializers.ValidationError(
                f"Tag {key!r}: at most {TAG_VALUE_MAX_LENGTH} characters."
            )
    return data


def _tag_changes_valid(data: Any) -> dict[str, str | None]:
    """Tags where null or "" stands for a tag to remove (None). The names and
    the count are those of the object as sent, removals included."""
    _tags_valid(dict.fromkeys(data, "") if isinstance(data, dict) else data)
    kept = _tags_valid({key: value for key, value in data.items() if value not in (None, "")})
    return {key: kept.get(key) for key in data}


_REMOVABLE_TAGS_SCHEMA = {
    "type": "object",
    "maxProperties": TAGS_MAX_COUNT,
    "propertyNames": {"minLength": 1, "maxLength": TAG_KEY_MAX_LENGTH},
    "additionalProperties": {"type": ["string", "null"], "maxLength": TAG_VALUE_MAX_LENGTH},
}


@extend_schema_field(_REMOVABLE_TAGS_SCHEMA)
class RemovableTagsField(TagsField):
    """Tags where one given as null or "" is one the caller leaves out."""

    def to_internal_value(self, data: Any) -> dict[str, str]:
        changes = _tag_changes_valid(data)
        return {key: value for key, value in changes.items() if value is not None}


@extend_schema_field(_REMOVABLE_TAGS_SCHEMA)
class TagChangesField(serializers.Field):
    """Changes to tags (or to any object of strings): a string sets its key,
    null or "" removes it (None); platform_site.foundation.tags.tags_changed applies them."""

    def to_internal_value(self, data: Any) -> dict[str, str | None]:
        return _tag_changes_valid(data)

    def to_representation(self, value: dict[str, str | None]) -> dict[str, str | None]:
        return value


class ReferenceField(StrictCharField):
    """The id of an object that the request refers to and the service looks
    up: one that cannot be of `pattern` names nothing, and is refused as any
    unknown reference is (400 ReferenceNotFound), so only the document states
    the pattern (platform_site.api.schema)."""

    def __init__(self, *, pattern: str, **kwargs: Any) -> None:
        self.pattern = pattern
        super().__init__(**kwargs)


# An http(s) URL with a DNS name, localhost, an IPv4 or a bracketed IPv6
# address, an optional port, and a path, query or fragment of printable
# ASCII. Django's URLValidator takes more (user:password@, Unicode hosts) in
# ways that no JSON Schema pattern can state; this one is what the document
# says, and Django's checks the rest. An IPv6 address is held to its whole
# grammar here (hexadecimal groups only: no embedded IPv4), so that the
# pattern takes no address that Django refuses.
_IPV4 = r"(?:0|25[0-5]|2[0-4][0-9]|1[0-9]?[0-9]?|[1-9][0-9]?)"
_HEXTET = r"[0-9A-Fa-f]{1,4}"
_IPV6 = (
    rf"(?:{_HEXTET}:){{7}}{_HEXTET}"
    rf"|(?:{_HEXTET}:){{1,7}}:"
    rf"|(?:{_HEXTET}:){{1,6}}:{_HEXTET}"
    rf"|(?:{_HEXTET}:){{1,5}}(?::{_HEXTET}){{1,2}}"
    rf"|(?:{_HEXTET}:){{1,4}}(?::{_HEXTET}){{1,3}}"
    rf"|(?:{_HEXTET}:){{1,3}}(?::{_HEXTET}){{1,4}}"
    rf"|(?:{_HEXTET}:){{1,2}}(?::{_HEXTET}){{1,5}}"
    rf"|{_HEXTET}:(?::{_HEXTET}){{1,6}}"
    rf"|:(?:(?::{_HEXTET}){{1,7}}|:)"
)
HTTP_URL_RE = (
    r"https?://(?:localhost"
    # Labels of up to 32 characters, up to six: a name within the 253
    # characters that Django's validator (and DNS) allow.
    r"|(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,30}[A-Za-z0-9])?\.){1,5}[A-Za-z]{2,63}"
    rf"|{_IPV4}(?:\.{_IPV4}){{3}}"
    rf"|\[(?:{_IPV6})\])"
    r"(?::[0-9]{1,5})?(?:[/?#][!-~]*)?"
)
HTTP_URL_MAX_LENGTH = 2000


class HttpUrlField(StrictCharField):
    """An http or https URL, of HTTP_URL_RE and also to Django's URLValidator."""

    default_error_messages = {"url": "Must be an http or https URL."}

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", HTTP_URL_MAX_LENGTH)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if value and not is_http_url(value):
            self.fail("url")
        return value


_HTTP_URL = re.compile(HTTP_URL_RE)
_URL_VALIDATOR = URLValidator(schemes=["http", "https"])


def is_http_url(value: str) -> bool:
    if _HTTP_URL.fullmatch(value) is None:
        return False
    try:
        _URL_VALIDATOR(value)
    except DjangoValidationError:
        return False
    return True
