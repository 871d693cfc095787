from typing import Any

from django.conf import settings
from django.core.validators import URLValidator
from django.utils import timezone
from rest_framework import serializers

from files.content_types import is_media_type
from files.models import FILE_KEY_MAX_LENGTH, PassageSubtype, PassageType
from platform_site.api.fields import (
    TAG_KEY_MAX_LENGTH,
    TAG_VALUE_MAX_LENGTH,
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


class FileUpsertSerializer(ClosedSerializer):
    key = StrictCharField(min_length=1, max_length=FILE_KEY_MAX_LENGTH)
    size = StrictIntegerField(min_value=0)
    contentType = StrictCharField(required=False, min_length=3, max_length=200)
    index = StrictBooleanField(required=False, default=False)
    tags = TagsField(required=False, default=dict)
    accessPolicies = serializers.ListField(
        child=StrictChoiceField(choices=ACCESS_POLICIES), required=False, default=list
    )
    metadata = JSONObjectField(required=False, default=dict)
    expiresAt = TimestampField(required=False)
    indexing = IndexingSerializer(required=False)
    publicContentImmediatelyAccessible = StrictBooleanField(required=False, default=False)

    def validate_size(self, value: int) -> int:
        if value > settings.FILE_UPLOAD_MAX_SIZE:
            raise serializers.ValidationError(
                f"Files are at most {settings.FILE_UPLOAD_MAX_SIZE} bytes on this server."
            )
        return value

    def validate_contentType(self, value: str) -> str:
        if not is_media_type(value):
            raise serializers.ValidationError(
                "Must be a media type such as text/plain or application/pdf."
            )
        return value

    def validate_accessPolicies(self, value: list[str]) -> list[str]:
        return sorted(set(value))

    def validate_expiresAt(self, value: Any) -> Any:
        if value <= timezone.now():
            raise serializers.ValidationError("Must be in the future.")
        return value


class PassageMetaSerializer(ClosedSerializer):
    type = StrictChoiceField(choices=PassageType.values, required=False, default=PassageType.CHUNK)
    subtype = StrictChoiceField(
        choices=PassageSubtype.values, required=False, default=PassageSubtype.PARAGRAPH
    )
    position = StrictIntegerField(required=False, min_value=0, max_value=2**31 - 1)
    pageNumber = StrictIntegerField(required=False, min_value=1, max_value=2**31 - 1)
    sourceUrl = StrictCharField(
        required=False, max_length=2000, validators=[URLValidator(schemes=["http", "https"])]
    )


class PassageInputSerializer(ClosedSerializer):
    content = StrictCharField(min_length=1, max_length=PASSAGE_CONTENT_MAX_LENGTH)
    meta = PassageMetaSerializer(required=False)


class PassagesSetSerializer(ClosedSerializer):
    passages = PassageInputSerializer(many=True)

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
    metadata = JSONObjectField(required=False)
    accessPolicies = serializers.ListField(
        child=StrictChoiceField(choices=ACCESS_POLICIES), required=False
    )
    expiresAt = TimestampField(required=False, allow_null=True)

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
