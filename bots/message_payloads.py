"""Message payloads, discriminated by `type`, as the contract's table lists them."""

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from platform_site.api.fields import StrictCharField, StrictChoiceField, StrictNumberField
from platform_site.api.serializers import ClosedSerializer


def text(**kwargs: Any) -> StrictCharField:
    return StrictCharField(min_length=1, **kwargs)


class _Payload(ClosedSerializer):
    type = text()


class TextPayload(_Payload):
    text = text()


class MarkdownPayload(_Payload):
    markdown = text()


class ImagePayload(_Payload):
    imageUrl = text()


class AudioPayload(_Payload):
    audioUrl = text()


class VideoPayload(_Payload):
    videoUrl = text()


class FilePayload(_Payload):
    fileUrl = text()
    title = text(required=False)


class LocationPayload(_Payload):
    latitude = StrictNumberField(min_value=-90, max_value=90)
    longitude = StrictNumberField(min_value=-180, max_value=180)
    address = text(required=False)
    title = text(required=False)


# `label` is also an attribute of DRF's Field; as a declared field it is taken
# out of the class by the serializer's metaclass, which mypy cannot see.
class CardAction(ClosedSerializer):
    action = StrictChoiceField(choices=["postback", "url", "say"])
    label = text()  # type: ignore[assignment]
    value = text()


class CardPayload(_Payload):
    title = text()
    subtitle = text(required=False)
    imageUrl = text(required=False)
    actions = CardAction(many=True)


class Option(ClosedSerializer):
    label = text()  # type: ignore[assignment]
    value = text()


class ChoicePayload(_Payload):
    text = text()
    options = Option(many=True)


class CardItem(CardPayload):
    # A carousel's items are cards; their `type` may be left out.
    type = StrictChoiceField(choices=["card"], required=False)  # type: ignore[assignment]


class CarouselPayload(_Payload):
    items = CardItem(many=True, allow_empty=False)


BLOC_ITEM_TYPES: dict[str, type[_Payload]] = {
    "text": TextPayload,
    "markdown": MarkdownPayload,
    "image": ImagePayload,
    "audio": AudioPayload,
    "video": VideoPayload,
    "file": FilePayload,
    "location": LocationPayload,
}


@extend_schema_field(OpenApiTypes.OBJECT)
class BlocItem(serializers.Field):
    """An item of a bloc: `{type, payload: {...}}` as the hosted API's clients
    send it, or the same fields flat beside `type`."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise serializers.ValidationError("Must be an object.")
        kind = data.get("type")
        if not isinstance(kind, str) or kind not in BLOC_ITEM_TYPES:
            raise serializers.ValidationError(
                {"type": [f"Must be one of: {', '.join(BLOC_ITEM_TYPES)}."]}
            )
        if "payload" in data:
            unknown = sorted(set(data) - {"type", "payload"})
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
            inner = data["payload"]
            if not isinstance(inner, dict):
                raise serializers.ValidationError({"payload": ["Must be an object."]})
            _validate(BLOC_ITEM_TYPES[kind], {**inner, "type": kind}, path="payload")
        else:
            _validate(BLOC_ITEM_TYPES[kind], data)
        return data

    def to_representation(self, value: dict[str, Any]) -> dict[str, Any]:
        return value


class BlocPayload(_Payload):
    items = serializers.ListField(child=BlocItem(), allow_empty=False)


PAYLOAD_TYPES: dict[str, type[_Payload]] = {
    **BLOC_ITEM_TYPES,
    "card": CardPayload,
    "choice": ChoicePayload,
    "dropdown": ChoicePayload,
    "carousel": CarouselPayload,
    "bloc": BlocPayload,
}


def _validate(schema: type[_Payload], data: dict[str, Any], path: str = "") -> None:
    serializer = schema(data=data)
    if not serializer.is_valid():
        raise serializers.ValidationError({path: serializer.errors} if path else serializer.errors)


@extend_schema_field(OpenApiTypes.OBJECT)
class MessagePayloadField(serializers.Field):
    """A message payload, checked against the schema its `type` names and kept
    as the client sent it."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise serializers.ValidationError("Must be an object.")
        kind = data.get("type")
        if not isinstance(kind, str) or kind not in PAYLOAD_TYPES:
            raise serializers.ValidationError(
                {"type": [f"Must be one of: {', '.join(PAYLOAD_TYPES)}."]}
            )
        _validate(PAYLOAD_TYPES[kind], data)
        return data

    def to_representation(self, value: dict[str, Any]) -> dict[str, Any]:
        return value
