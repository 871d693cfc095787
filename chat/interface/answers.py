"""The shapes the chat interface answers its end users, for the OpenAPI
document only (chat.presenters builds the JSON, with chat ids)."""

from rest_framework import serializers

from platform_site.api.answers import JsonObjectAnswerField, answer_of, page_of


class ChatUserSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField(required=False)
    pictureUrl = serializers.CharField(required=False)
    profile = serializers.CharField(required=False)
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()

    # A field named `data` would hide Serializer.data: added here instead.
    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["data"] = JsonObjectAnswerField(
            required=False, help_text="The official webchat's userData"
        )
        return fields


class ChatConversationSerializer(serializers.Serializer):
    id = serializers.CharField()
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()


class ChatFeedbackSerializer(serializers.Serializer):
    value = serializers.CharField()
    comment = serializers.CharField(required=False)


# A custom event a user sent in a conversation; a message is one with more.
class ChatEventSerializer(serializers.Serializer):
    id = serializers.CharField()
    createdAt = serializers.DateTimeField()
    payload = JsonObjectAnswerField()
    conversationId = serializers.CharField()
    userId = serializers.CharField()


class ChatMessageSerializer(ChatEventSerializer):
    metadata = JsonObjectAnswerField(required=False)
    feedback = ChatFeedbackSerializer(
        required=False, help_text="The feedback the key's user gave on it, if any"
    )


class ChatHelloSerializer(serializers.Serializer):
    message = serializers.CharField()


class ChatUserKeySerializer(serializers.Serializer):
    key = serializers.CharField(help_text="The user's key: send it as x-user-key")


ChatUserAnswerSerializer = answer_of(ChatUserSerializer, "user")
ChatUserCreatedAnswerSerializer = answer_of(
    ChatUserSerializer, "user", name="ChatUserCreated", key=serializers.CharField()
)
ChatConversationAnswerSerializer = answer_of(ChatConversationSerializer, "conversation")
ChatConversationPageSerializer = page_of(ChatConversationSerializer, "conversations")
ChatMessageAnswerSerializer = answer_of(ChatMessageSerializer, "message")
ChatMessagePageSerializer = page_of(ChatMessageSerializer, "messages")
ChatEventAnswerSerializer = answer_of(ChatEventSerializer, "event")
ChatParticipantAnswerSerializer = answer_of(
    ChatUserSerializer, "participant", name="ChatParticipant"
)
ChatParticipantPageSerializer = page_of(ChatUserSerializer, "participants", name="ChatParticipant")
