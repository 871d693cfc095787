from typing import Any

from django.conf import settings
from django.core.validators import RegexValidator
from django.utils import timezone
from rest_framework import serializers

from files.content_types import MEDIA_TYPE_RE
from files.models import FILE_KEY_MAX_LENGTH, PassageSubtype, PassageType
from platform_site.api.fields import (
    TAG_KEY_MAX_LENGTH,
    TAG_VALUE_MAX_LENGTH,
    HttpUrlField,
    JSONObjectField,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictIntegerField,
    TagsField,
    TimestampField,
)
from platform_site.api.serializers import ClosedSerializer

ACCESS_POLICIES = ("integrations", "public_content")
CHUNK_LENGTH_MIN = 100
CHUNK_LENGTH_MAX = 5000
PASSAGE_CONTENT_MAX_LENGTH = CHUNK_LENGTH_MAX


class ChunkingSerializer(ClosedSerializer):
    maximumChunkLength = StrictIntegerField(
        required=False, min_value=CHUNK_LENGTH_MIN, max_value=CHUNK_LENGTH_MAX
    )


class IndexingConfigurationSerializer(ClosedSerializer):
    # Only the settings this server carries out are accepted: a client that
    # asks for summaries or vision learns at once that it will not get them.
    chunking = ChunkingSerializer(required=False)


class IndexingSerializer(ClosedSerializer):
    configuration = IndexingConfigurationSerializer(required=False)


class FileFieldsSerializer(ClosedSerializer):
    """What a client says of a file it makes: PUT /v1/files, and the chat
    interface's POST files (chat.interface.serializers)."""

    key = StrictCharField(min_length=1, max_length=FILE_KEY_MAX_LENGTH)
    size = StrictIntegerField(min_value=0)
    contentType = StrictCharField(
        required=False,
        min_length=3,
        max_length=200,
        validators=[
            RegexValidator(
                rf"^(?:{MEDIA_TYPE_RE})\Z",
                message="Must be a media type such as text/plain or application/pdf.",
            )
        ],
    )
    tags = TagsField(required=False, default=dict)
    accessPolicies = serializers.ListField(
        child=StrictChoiceField(choices=ACCESS_POLICIES), required=False, default=list
    )
    expiresAt = TimestampField(required=False, help_text="Must be in the future")

    def size_limit(self) -> int:
        return int(settings.FILE_UPLOAD_MAX_SIZE)

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        # The limit is read with each body (and the OpenAPI document): it
        # follows the setting.
        fields["size"] = StrictIntegerField(
            min_value=0,
            max_value=self.size_limit(),
            error_messages={"max_value": "Files are at most {max_value} bytes on this server."},
        )
        return fields

    def validate_accessPolicies(self, value: list[str]) -> list[str]:
        return sorted(set(value))

    def validate_expiresAt(self, value: Any) -> Any:
        if value <= timezone.now():
            raise serializers.ValidationError("Must be in the future.")
        return value


class FileUpsertSerializer(FileFieldsSerializer):
    index = StrictBooleanField(required=False, default=False)
    metadata = JSONObjectField(required=False, default=dict)
    indexing = IndexingSerializer(required=False)
    publicContentImmediatelyAccessible = StrictBooleanField(required=False, default=False)


class PassageMetaSerializer(ClosedSerializer):
    type = StrictChoiceField(choices=PassageType.values, required=False, default=PassageType.CHUNK)
    subtype = StrictChoiceField(
        choices=PassageSubtype.values, required=False, default=PassageSubtype.PARAGRAPH
    )
    position = StrictIntegerField(required=False, min_value=0, max_value=2**31 - 1)
    pageNumber = StrictIntegerField(required=False, min_value=1, max_value=2**31 - 1)
    sourceUrl = HttpUrlField(required=False, max_length=2000)


class PassageInputSerializer(ClosedSerializer):
    content = StrictCharField(min_length=1, max_length=PASSAGE_CONTENT_MAX_LENGTH)
    meta = PassageMetaSerializer(required=False)


_POSITIONED = {"required": ["meta"], "properties": {"meta": {"required": ["position"]}}}


class PassagesSetSerializer(ClosedSerializer):
    passages = PassageInputSerializer(
        many=True, help_text="Positions, when given, are given for all and are distinct"
    )
    # Every passage has a meta.position, or none has (distinct ones: no
    # JSON Schema keyword says that of a property of items).
    schema_constraints = {
        "passages": {"anyOf": [{"items": _POSITIONED}, {"items": {"not": _POSITIONED}}]}
    }

    def validate_passages(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        positions = [p["meta"]["position"] for p in value if "position" in p.get("meta", {})]
        if positions and len(positions) != len(value):
            raise serializers.ValidationError(
                "Give meta.position for every passage or for none (then the order counts)."
            )
        if len(set(positions)) != len(positions):
            raise serializers.ValidationError("Two passages have the same meta.position.")
        return value


class FileMetadataSerializer(ClosedSerializer):
    # A tag set to null is removed; the others are added or changed.
    tags = serializers.DictField(
        child=StrictCharField(max_length=TAG_VALUE_MAX_LENGTH, allow_null=True), required=False
    )
    schema_constraints = {
        "tags": {"propertyNames": {"minLength": 1, "maxLength": TAG_KEY_MAX_LENGTH}}
    }
    metadata = JSONObjectField(required=False)
    accessPolicies = serializers.ListField(
        child=StrictChoiceField(choices=ACCESS_POLICIES), required=False
    )
    expiresAt = TimestampField(
        required=False, allow_null=True, help_text="Must be in the future; null: never"
    )

    def validate_tags(self, value: dict[str, str | None]) -> dict[str, str | None]:
        for key in value:
            if not 1 <= len(key) <= TAG_KEY_MAX_LENGTH:
                raise serializers.ValidationError(
                    f"Tag names are 1 to {TAG_KEY_MAX_LENGTH} characters."
                )
        return value

    def validate_accessPolicies(self, value: list[str]) -> list[str]:
        return sorted(set(value))

    def validate_expiresAt(self, value: Any) -> Any:
        if value is not None and value <= timezone.now():
            raise serializers.ValidationError("Must be in the future.")
        return value


SEARCH_QUERY_MAX_LENGTH = 2000
SEARCH_LIMIT_DEFAULT = 10
# As many as a page of any list.
SEARCH_LIMIT_MAX = settings.PAGE_SIZE_MAX
SEARCH_CONTEXT_DEPTH_MAX = 10


class FileSearchQuery(serializers.Serializer):
    """GET /v1/files/search's parameters (its tags are read apart:
    platform_site.foundation.tags.tag_conditions)."""

    query = serializers.CharField(max_length=SEARCH_QUERY_MAX_LENGTH, trim_whitespace=True)
    contextDepth = serializers.IntegerField(
        min_value=0, max_value=SEARCH_CONTEXT_DEPTH_MAX, default=1
    )
    limit = serializers.IntegerField(
        min_value=1, max_value=SEARCH_LIMIT_MAX, default=SEARCH_LIMIT_DEFAULT
    )
    consolidate = StrictChoiceField(choices=["true", "false"], default="false")
    includeBreadcrumb = StrictChoiceField(choices=["true", "false"], default="false")
    withContext = StrictChoiceField(choices=["true", "false"], default="false")
