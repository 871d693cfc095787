"""Named shapes of the API's answers, for the OpenAPI document only: the
presenters build the JSON, and these describe it, one class per resource
declared in its app's `answers.py`, wrapped once by `answer_of` (one object)
and `page_of` (a page of a list)."""

import copy
from dataclasses import dataclass
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from platform_site.api.schema import JSON_OBJECT
from platform_site.api.serializers import ClosedSerializer


class PageMetaSerializer(serializers.Serializer):
    nextToken = serializers.CharField(
        required=False, help_text="Left out on the last page: pass it back for the next one"
    )


class TagsAnswerField(serializers.DictField):
    child = serializers.CharField(allow_blank=True)


@extend_schema_field({"$ref": JSON_OBJECT})
class JsonObjectAnswerField(serializers.Field):
    """Any JSON object, as the caller stored it."""


class EmptyAnswerSerializer(ClosedSerializer):
    """`{}`: done, nothing to say."""


def _shape(
    name: str, fields: dict[str, serializers.Field], doc: str
) -> type[serializers.Serializer]:
    # Fields are given by get_fields, not as class attributes, so that a
    # field may be named like a Serializer's own attributes (`data`).
    def get_fields(self: serializers.Serializer) -> dict[str, serializers.Field]:
        return copy.deepcopy(fields)

    return type(
        f"{name}Serializer", (serializers.Serializer,), {"__doc__": doc, "get_fields": get_fields}
    )


def answer_of(
    item: type[serializers.Serializer], key: str, /, *, name: str | None = None, **more: Any
) -> type[serializers.Serializer]:
    """`{key: item}` (and any `more` fields), named `<item>Answer`."""
    base = name or item.__name__.removesuffix("Serializer")
    return _shape(f"{base}Answer", {key: item(), **more}, f"One {base}, as `{key}`.")


def page_of(
    item: type[serializers.Serializer], key: str, /, *, name: str | None = None
) -> type[serializers.Serializer]:
    """`{key: [item, …], "meta": {"nextToken"?}}`, named `<item>Page`."""
    base = name or item.__name__.removesuffix("Serializer")
    return _shape(
        f"{base}Page",
        {key: item(many=True), "meta": PageMetaSerializer()},
        f"A page of {base} objects, as `{key}`, and the next page's token.",
    )


class LivenessSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok"])


class ReadinessSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ready"])
    database = serializers.ChoiceField(choices=["ok"])
    broker = serializers.ChoiceField(choices=["ok"])


# The actions whose answer follows from the resource's shapes.
_ONE_ACTIONS = {"retrieve": 200, "update": 200, "partial_update": 200, "create": 201}


@dataclass(frozen=True)
class Answers:
    """What a resource's viewset answers, for the OpenAPI document, declared
    once on the viewset (its `answers`) rather than on each action: `create`
    answers 201 with `one`, `retrieve` and `update` 200 with it, `list` the
    `page`, `get_or_create` 200 or 201 with `got_or_created`, `destroy` `{}`.
    An action that answers otherwise says so in its own `extend_schema`."""

    one: type[serializers.Serializer] | None = None
    page: type[serializers.Serializer] | None = None
    got_or_created: type[serializers.Serializer] | None = None

    def of(self, action: str) -> dict[int, type[serializers.Serializer]] | None:
        if action in _ONE_ACTIONS and self.one is not None:
            return {_ONE_ACTIONS[action]: self.one}
        if action == "list" and self.page is not None:
            return {200: self.page}
        if action == "get_or_create" and self.got_or_created is not None:
            return dict.fromkeys((200, 201), self.got_or_created)
        if action == "destroy":
            return {200: EmptyAnswerSerializer}
        return None
