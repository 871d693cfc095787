"""Message payloads, discriminated by `type`, as the contract's table lists them."""

from typing import Any, ClassVar

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from platform_site.api.exception_handler import describe_validation_error
from platform_site.api.fields import StrictCharField, StrictChoiceField, StrictNumberField
from platform_site.api.serializers import ClosedSerializer
from platform_site.foundation.domain_errors import InvalidValue


def text(**kwargs: Any) -> StrictCharField:
    return StrictCharField(min_length=1, **kwargs)


def payload_type(*names: str) -> StrictChoiceField:
    """The `type` of a payload schema: the names it stands for."""
    return StrictChoiceField(choices=list(names))


class _Payload(ClosedSerializer):
    # MessagePayloadField picks the schema by `type`: each one's field says
    # which types it stands for, as the OpenAPI document's union does.
    type: ClassVar[StrictChoiceField]


class TextPayload(_Payload):
    type = payload_type("text")
    text = text()


class MarkdownPayload(_Payload):
    type = payload_type("markdown")
    markdown = text()


class ImagePayload(_Payload):
    type = payload_type("image")
    imageUrl = text()
    # The file it shows, when it is a file of the bot (the official webchat's uploads).
    fileId = text(required=False)


class AudioPayload(_Payload):
    type = payload_type("audio")
    audioUrl = text()
    # The file it shows, when it is a file of the bot (the official webchat's uploads).
    fileId = text(required=False)


class VideoPayload(_Payload):
    type = payload_type("video")
    videoUrl = text()
    # The file it shows, when it is a file of the bot (the official webchat's uploads).
    fileId = text(required=False)


class FilePayload(_Payload):
    type = payload_type("file")
    fileUrl = text()
    title = text(required=False)
    fileId = text(required=False)


class LocationPayload(_Payload):
    type = payload_type("location")
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
    type = payload_type("card")
    title = text()
    subtitle = text(required=False)
    imageUrl = text(required=False)
    actions = CardAction(many=True)


class Option(ClosedSerializer):
    label = text()  # type: ignore[assignment]
    value = text()


class ChoicePayload(_Payload):
    type = payload_type("choice", "dropdown")
    text = text()
    options = Option(many=True)


class CardItem(CardPayload):
    # A carousel's items are cards; their `type` may be left out.
    type = StrictChoiceField(choices=["card"], required=False)


class CarouselPayload(_Payload):
    type = payload_type("carousel")
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


# Its schema is chat.openapi.BlocItemScheme's.
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
    type = payload_type("bloc")
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


@extend_schema_field(
    PolymorphicProxySerializer(
        component_name="MessagePayload",
        serializers=dict[str, serializers.Serializer | type[serializers.Serializer]](PAYLOAD_TYPES),
        resource_type_field_name="type",
    )
)
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


def payload_of_type(payload: dict[str, Any], *, kind: str) -> dict[str, Any]:
    """`payload` as the new payload of a message of type `kind`, which it
    carries or is given (a message keeps its type); InvalidValue saying where
    it is wrong (`payload.text: …`) when it is no such payload."""
    carried = payload.get("type", kind)
    if carried != kind:
        raise InvalidValue(
            f"payload.type: {carried!r} does not agree with the message's type {kind!r}."
        )
    try:
        return MessagePayloadField().run_validation({**payload, "type": kind})
    except serializers.ValidationError as error:
        lines = describe_validation_error({"payload": error.detail})
        raise InvalidValue("; ".join(lines)) from None
