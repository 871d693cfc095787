import secrets
import uuid

from django.db import models

from bots.models import Bot, Conversation, User
from platform_site.secret_fields import EncryptedCharField


def new_webhook_id() -> str:
    return str(uuid.uuid4())


def new_encryption_key() -> str:
    return secrets.token_urlsafe(32)


class UserKeyMode(models.TextChoices):
    AUTO = "auto", "auto: the server issues keys at POST /users"
    MANUAL = "manual", "manual: the operator's client signs keys with the encryption key"


class ChatConnection(models.Model):
    """The chat interface of a bot, reached at {chat_url}/{webhook_id}. User
    keys are HS256 JWTs signed with `encryption_key`."""

    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="chat_connections")
    name = models.CharField(max_length=200, blank=True)
    webhook_id = models.CharField(max_length=64, unique=True, default=new_webhook_id)
    # Encrypted at rest: whoever holds it can mint any user's key.
    encryption_key = EncryptedCharField(max_length=200, default=new_encryption_key)
    user_key_mode = models.CharField(
        max_length=10,
        choices=UserKeyMode.choices,
        default=UserKeyMode.AUTO,
        help_text=(
            "In manual mode POST /users is refused: the operator's own service signs "
            "each user's key, and clients resume with POST /users/get-or-create."
        ),
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.webhook_id} ({self.bot_id})"


class ScheduledMessage(models.Model):
    """A bot message created with a `schedule`, waiting to fall due. When it
    does, the delivery workers' claim (events/engine/claims.py) turns it into the
    Message of the same id and streams it; until then no list, listener or
    read shows it. Deleting its conversation or author cancels it."""

    # The id the message will have: a ULID of the due time, so that the
    # message sorts where it appears, not where it was asked for.
    id = models.CharField(max_length=36, primary_key=True, editable=False)
    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="+")
    type = models.CharField(max_length=20)
    payload = models.JSONField()
    tags = models.JSONField(default=dict, blank=True)
    origin = models.CharField(max_length=20, blank=True)
    due_at = models.DateTimeField(db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.id} due {self.due_at:%Y-%m-%d %H:%M:%S}"
