"""Request bodies of the chat interface (closed: an unknown field is a 400)."""

import json
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.validators import RegexValidator
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chat.keys import CHAT_ID_MAX_LENGTH, CHAT_ID_RE
from chat.message_payloads import MessagePayloadField
from chat.models import FeedbackValue
from files.models import FILE_KEY_MAX_LENGTH
from files.serializers import FileFieldsSerializer
from platform_site.api.fields import (
    HttpUrlField,
    JSONObjectField,
    ReferenceField,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictIntegerField,
)
from platform_site.api.schema import JSON_OBJECT, NO_NUL_PATTERN
from platform_site.api.serializers import ClosedSerializer

# A RegexValidator, so that the OpenAPI document states the pattern.
_CHAT_ID_RULE = RegexValidator(
    rf"^{CHAT_ID_RE.pattern}\Z",
    message=f"Must be 1 to {CHAT_ID_MAX_LENGTH} letters, digits, '_', '-' or '/'.",
)


def chat_id_field(**kwargs: Any) -> StrictCharField:
    """A caller-chosen id of a user or conversation."""
    return StrictCharField(validators=[_CHAT_ID_RULE], **kwargs)


def chat_id_reference() -> ReferenceField:
    """The chat id of a conversation a body names: one that cannot be a chat
    id names none (400 ReferenceNotFound)."""
    return ReferenceField(
        pattern=f"^{CHAT_ID_RE.pattern}$", min_length=1, max_length=CHAT_ID_MAX_LENGTH
    )


# The JSON of a user's `userData`, at most.
USER_DATA_MAX_BYTES = 8 * 1024


@extend_schema_field(
    {
        "oneOf": [{"$ref": JSON_OBJECT}, {"type": "string", "pattern": NO_NUL_PATTERN}],
        "nullable": True,
        "description": (
            "What the official webchat says of its user: an object, or an HS256 JWT signed"
            " with the chat's encryption key whose claims are the object; null clears it."
            f" At most {USER_DATA_MAX_BYTES} bytes of JSON."
        ),
    }
)
class UserDataField(serializers.Field):
    """An object, a signed token standing for one (checked against the
    chat's key by the view, which knows the chat), or None to clear it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(required=False, allow_null=True, **kwargs)

    def to_internal_value(self, data: Any) -> dict[str, Any] | str:
        if isinstance(data, str):
            return data
        if not isinstance(data, dict):
            raise serializers.ValidationError("Must be an object or a signed token.")
        return user_data_sized(data)

    def to_representation(self, value: Any) -> Any:
        return value


def user_data_sized(data: dict[str, Any]) -> dict[str, Any]:
    size = len(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode())
    if size > USER_DATA_MAX_BYTES:
        raise serializers.ValidationError(
            f"At most {USER_DATA_MAX_BYTES} bytes of JSON ({size} sent)."
        )
    return data


class UserProfileSerializer(ClosedSerializer):
    """What a user says about themselves; an empty string clears a field."""

    name = StrictCharField(required=False, allow_blank=True, max_length=200)
    pictureUrl = HttpUrlField(required=False, allow_blank=True, max_length=2000)
    profile = StrictCharField(required=False, allow_blank=True, max_length=1000)


class UserUpdateSerializer(UserProfileSerializer):
    """PUT users/me: the profile, and the `userData` the official webchat sends."""

    userData = UserDataField()


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
    conversationId = chat_id_reference()
    metadata = JSONObjectField(required=False)


class ChatEventCreateSerializer(ClosedSerializer):
    payload = JSONObjectField()
    conversationId = chat_id_reference()
    # What the official webchat sends: false leaves the event unlinked.
    bindConversation = StrictBooleanField(required=False, default=True)
    bindUser = StrictBooleanField(required=False, default=True)


# A webchat file's key, kept under webchat/{user}/ (chat.services.files).
CHAT_FILE_KEY_MAX_LENGTH = FILE_KEY_MAX_LENGTH - len("webchat//") - CHAT_ID_MAX_LENGTH

# The last millisecond of year 9999: what a timestamp can say.
_LAST_MILLISECOND = 253_402_300_799_999


class UserKeySerializer(ClosedSerializer):
    """POST users/key, as the official webchat's generateUserKey sends it."""

    id = chat_id_field()
    expiresAt = StrictIntegerField(
        required=False,
        min_value=1,
        max_value=_LAST_MILLISECOND,
        help_text="When the key stops being accepted, in milliseconds since the epoch.",
    )

    def validate_expiresAt(self, value: int) -> datetime:  # noqa: N802 - DRF's naming
        expires_at = datetime.fromtimestamp(value / 1000, UTC)
        if expires_at <= timezone.now():
            raise serializers.ValidationError("Must be in the future.")
        return expires_at


class FeedbackSerializer(ClosedSerializer):
    """PUT messages/{id}/feedback, as the official webchat sends it."""

    value = StrictChoiceField(choices=FeedbackValue.choices)
    comment = StrictCharField(required=False, allow_blank=True, max_length=1000)


class ChatMessageUpdateSerializer(ClosedSerializer):
    """PUT messages/{id}, as the official webchat's updateMessage sends it."""

    payload = MessagePayloadField(required=False)
    metadata = JSONObjectField(required=False)


@extend_schema_field({"type": "boolean", "enum": [False]})
class NotIndexedField(StrictBooleanField):
    """`index`, which the official webchat may send: false only, since the
    files of a chat's users are not indexed."""

    def to_internal_value(self, data: Any) -> bool:
        value = super().to_internal_value(data)
        if value:
            raise serializers.ValidationError("The files of a chat's users are not indexed.")
        return False


class ChatFileCreateSerializer(FileFieldsSerializer):
    """POST files, as the official webchat's createFile sends it: the key is
    the user's own (chat.services.files), the size at most
    CHAT_FILE_MAX_SIZE, and `index` false only."""

    key = StrictCharField(min_length=1, max_length=CHAT_FILE_KEY_MAX_LENGTH)
    index = NotIndexedField(required=False, default=False)

    def size_limit(self) -> int:
        return int(settings.CHAT_FILE_MAX_SIZE)
