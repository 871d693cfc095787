import secrets
import uuid

from django.db import models

from bots.models import Bot


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
    encryption_key = models.CharField(max_length=200, default=new_encryption_key)
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
