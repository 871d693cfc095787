"""The shapes the runtime API's chat routes answer, for the OpenAPI document
only (chat.presenters builds the JSON, with runtime ids)."""

from rest_framework import serializers

from platform_site.api.answers import JsonObjectAnswerField, TagsAnswerField, answer_of, page_of


class CreatedMetaSerializer(serializers.Serializer):
    created = serializers.BooleanField(help_text="Whether it was made by this request")


class ConversationSerializer(serializers.Serializer):
    id = serializers.CharField()
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()
    channel = serializers.CharField()
    integration = serializers.CharField(
        allow_blank=True, help_text="The integration that made it; empty for the bot's own"
    )
    tags = TagsAnswerField()
    properties = TagsAnswerField(required=False)


class UserSerializer(serializers.Serializer):
    id = serializers.CharField()
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()
    tags = TagsAnswerField()
    name = serializers.CharField(required=False)
    pictureUrl = serializers.CharField(required=False)
    properties = TagsAnswerField(required=False)
    attributes = TagsAnswerField(required=False)


class MessageSerializer(serializers.Serializer):
    id = serializers.CharField()
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()
    type = serializers.CharField()
    payload = JsonObjectAnswerField()
    direction = serializers.ChoiceField(choices=["incoming", "outgoing"])
    userId = serializers.CharField()
    conversationId = serializers.CharField()
    tags = TagsAnswerField()
    origin = serializers.CharField(required=False)


ConversationAnswerSerializer = answer_of(ConversationSerializer, "conversation")
ConversationCreatedAnswerSerializer = answer_of(
    ConversationSerializer,
    "conversation",
    name="ConversationGotOrCreated",
    meta=CreatedMetaSerializer(),
)
ConversationPageSerializer = page_of(ConversationSerializer, "conversations")
UserAnswerSerializer = answer_of(UserSerializer, "user")
UserCreatedAnswerSerializer = answer_of(
    UserSerializer, "user", name="UserGotOrCreated", meta=CreatedMetaSerializer()
)
UserPageSerializer = page_of(UserSerializer, "users")
MessageAnswerSerializer = answer_of(MessageSerializer, "message")
MessageCreatedAnswerSerializer = answer_of(
    MessageSerializer, "message", name="MessageGotOrCreated", meta=CreatedMetaSerializer()
)
MessagePageSerializer = page_of(MessageSerializer, "messages")
ParticipantAnswerSerializer = answer_of(UserSerializer, "participant", name="Participant")
ParticipantPageSerializer = page_of(UserSerializer, "participants", name="Participant")
