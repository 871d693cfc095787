"""The shapes the files API answers, for the OpenAPI document only
(files.presenters builds the JSON)."""

from rest_framework import serializers

from files.models import FileStatus, PassageType
from platform_site.api.answers import (
    JsonObjectAnswerField,
    PageMetaSerializer,
    TagsAnswerField,
    answer_of,
    page_of,
)


class FileSerializer(serializers.Serializer):
    id = serializers.CharField()
    botId = serializers.CharField()
    key = serializers.CharField()
    size = serializers.IntegerField()
    contentType = serializers.CharField()
    tags = TagsAnswerField()
    metadata = JsonObjectAnswerField()
    accessPolicies = serializers.ListField(child=serializers.CharField())
    index = serializers.BooleanField()
    status = serializers.ChoiceField(choices=FileStatus.values)
    failedStatusReason = serializers.CharField(
        required=False, allow_blank=True, help_text="Only when its upload or indexing failed"
    )
    expiresAt = serializers.DateTimeField(required=False, help_text="When it expires, if it does")
    url = serializers.CharField(required=False, help_text="Its download URL, once it has content")
    uploadUrl = serializers.CharField(
        required=False, help_text="Where to PUT its content (answered by upsertFile)"
    )
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()


class PassageMetaAnswerSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=PassageType.values)
    subtype = serializers.CharField(required=False, allow_blank=True)
    position = serializers.IntegerField(required=False)
    pageNumber = serializers.IntegerField(required=False)
    sourceUrl = serializers.CharField(required=False)


class PassageSerializer(serializers.Serializer):
    id = serializers.CharField()
    content = serializers.CharField(allow_blank=True)
    meta = PassageMetaAnswerSerializer()


class SearchHitFileSerializer(serializers.Serializer):
    id = serializers.CharField()
    key = serializers.CharField()
    contentType = serializers.CharField()
    metadata = JsonObjectAnswerField()
    tags = TagsAnswerField()
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()


class SearchContextSerializer(serializers.Serializer):
    id = serializers.CharField(required=False)
    text = serializers.CharField(allow_blank=True)
    offset = serializers.IntegerField(required=False)
    type = serializers.CharField()


class SearchHitSerializer(serializers.Serializer):
    content = serializers.CharField(allow_blank=True)
    score = serializers.FloatField(help_text="Higher is more similar")
    meta = PassageMetaAnswerSerializer()
    file = SearchHitFileSerializer()

    # A field named `context` would hide Field.context: added here instead.
    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["context"] = SearchContextSerializer(
            many=True, required=False, help_text="The passages around it, when asked for"
        )
        return fields


class SearchAnswerSerializer(serializers.Serializer):
    passages = SearchHitSerializer(many=True)


class FileTagPageSerializer(serializers.Serializer):
    tags = serializers.ListField(child=serializers.CharField())
    meta = PageMetaSerializer()


class FileTagValuePageSerializer(serializers.Serializer):
    values = serializers.ListField(child=serializers.CharField(allow_blank=True))
    meta = PageMetaSerializer()


FileAnswerSerializer = answer_of(FileSerializer, "file")
FilePageSerializer = page_of(FileSerializer, "files")
PassagePageSerializer = page_of(PassageSerializer, "passages")
