import secrets
import uuid

from django.db import models

from bots.models import Bot, Conversation, Message, User, Workflow
from platform_site.foundation.ids import PrefixedIdField
from platform_site.foundation.secret_fields import EncryptedCharField

# A state's payload, as compact JSON, at most (413 beyond).
STATE_PAYLOAD_MAX_BYTES = 128 * 1024
# A state's expiry, in milliseconds: 1 ms to 30 days, as the hosted API bounds it.
STATE_EXPIRY_MAX_MS = 2_592_000_000
STATE_NAME_MAX_LENGTH = 200


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


class StateType(models.TextChoices):
    """What a state belongs to. The hosted API also keeps states of
    integrations, which this service does not run."""

    CONVERSATION = "conversation"
    USER = "user"
    BOT = "bot"
    WORKFLOW = "workflow"


def _linked(field: str) -> models.Index:
    # Where a conversation, user or workflow is deleted, its states go too:
    # found through these (a state links one at most, so each row is in one).
    return models.Index(
        fields=[field], name=f"state_{field}_idx", condition=models.Q(**{f"{field}__isnull": False})
    )


class State(models.Model):
    """A named JSON payload a bot keeps on one of its conversations, users or
    workflows, or on itself, found by (bot, type, target, name). With an
    expiry it is idle-timed: each write moves `expires_at` to now + expiry,
    and once that passes it reads as absent and the delivery workers' clock
    (chat/services/state_expiry.py) turns it into a `state_expired` event."""

    id = PrefixedIdField(prefix="state")
    # Indexed through the key, which leads with it.
    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="+", db_index=False)
    type = models.CharField(max_length=20, choices=StateType.choices)
    # The conversation, user or workflow id, or the bot's own: the key holds
    # the id as the path gives it, for every type alike.
    target_id = models.CharField(max_length=36)
    name = models.CharField(max_length=STATE_NAME_MAX_LENGTH)
    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,
    )
    user = models.ForeignKey(
        User, on_delete=models.CASCADE, null=True, blank=True, related_name="+", db_index=False
    )
    workflow = models.ForeignKey(
        Workflow,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,
    )
    payload = models.JSONField()
    expiry = models.BigIntegerField(
        null=True, blank=True, help_text="Milliseconds of idleness after which it expires."
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["bot", "type", "target_id", "name"], name="state_key_unique"
            ),
        ]
        indexes = [
            # What expires, earliest first: the sweeper's one index. States
            # without an expiry are not in it.
            models.Index(
                fields=["expires_at"],
                name="state_expires_idx",
                condition=models.Q(expires_at__isnull=False),
            ),
            _linked("conversation"),
            _linked("user"),
            _linked("workflow"),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.target_id} {self.name}"


class FeedbackValue(models.TextChoices):
    POSITIVE = "positive"
    NEGATIVE = "negative"


class MessageFeedback(models.Model):
    """An end user's verdict on a message of a conversation they take part
    in (the official webchat's thumbs up or down, with an optional
    comment): one per user and message, which they may change or take back.
    The bot hears of each change as a `message_feedback` event."""

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="+")
    value = models.CharField(max_length=10, choices=FeedbackValue.choices)
    comment = models.CharField(max_length=1000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["message", "user"], name="message_feedback_unique")
        ]

    def __str__(self) -> str:
        return f"{self.value} on {self.message_id}"
