"""Request bodies of the chat interface (closed: an unknown field is a 400)."""

from typing import Any

from django.core.validators import URLValidator
from rest_framework import serializers

from bots.message_payloads import MessagePayloadField
from chat.keys import CHAT_ID_MAX_LENGTH, is_chat_id
from platform_site.api.fields import JSONObjectField, StrictCharField
from platform_site.api.serializers import ClosedSerializer


def _chat_id_rule(value: str) -> None:
    if not is_chat_id(value):
        raise serializers.ValidationError(
            f"Must be 1 to {CHAT_ID_MAX_LENGTH} letters, digits, '_', '-' or '/'."
        )


def chat_id_field(**kwargs: Any) -> StrictCharField:
    """A caller-chosen id of a user or conversation."""
    return StrictCharField(validators=[_chat_id_rule], **kwargs)


class UserProfileSerializer(ClosedSerializer):
    """What a user says about themselves; an empty string clears a field."""

    name = StrictCharField(required=False, allow_blank=True, max_length=200)
    pictureUrl = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=2000,
        validators=[URLValidator(schemes=["http", "https"])],
    )
    profile = StrictCharField(required=False, allow_blank=True, max_length=1000)


class UserCreateSerializer(UserProfileSerializer):
    id = chat_id_field(required=False)


class ConversationCreateSerializer(ClosedSerializer):
    id = chat_id_field(required=False)


class ConversationGetOrCreateSerializer(ClosedSerializer):
    id = chat_id_field()


class ParticipantAddSerializer(ClosedSerializer):
    userId = chat_id_field()


class ChatMessageCreateSerializer(ClosedSerializer):
    payload = MessagePayloadField()
    conversationId = StrictCharField(min_length=1, max_length=CHAT_ID_MAX_LENGTH)
    metadata = JSONObjectField(required=False)


class ChatEventCreateSerializer(ClosedSerializer):
    payload = JSONObjectField()
    conversationId = StrictCharField(min_length=1, max_length=CHAT_ID_MAX_LENGTH)
