from django.db import models

from platform_site.foundation.ids import PrefixedIdField

from .bot import Bot, IntegrationInstallation

# The channel of a conversation made through the chat interface: the name the
# hosted API's chat integration gives its one channel.
CHAT_CHANNEL = "channel"


class User(models.Model):
    """A bot's end user (not a platform account: those are Django's users).

    `chat_id` is the id the chat interface shows; a caller may choose it, and it
    is the same as `id` when they do not."""

    id = PrefixedIdField(prefix="user")
    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="users")
    chat_id = models.CharField(max_length=70)
    name = models.CharField(max_length=200, blank=True)
    picture_url = models.URLField(max_length=2000, blank=True)
    profile = models.CharField(max_length=1000, blank=True)
    tags = models.JSONField(default=dict, blank=True)
    # Strings by name, as the runtime API's `properties` (shared with the
    # bot's integrations) and deprecated `attributes` hold them.
    properties = models.JSONField(default=dict, blank=True)
    attributes = models.JSONField(default=dict, blank=True)
    # What the official webchat says of its user (`userData`), as it sent it.
    data = models.JSONField(null=True, blank=True)
    integration = models.ForeignKey(
        IntegrationInstallation, on_delete=models.SET_NULL, null=True, blank=True
    )
    # Made for a chat client that showed no credential (POST users) and in no
    # conversation since: deleted once stale if nothing refers to it
    # (chat/services/user_purge.py). Cleared for good when they create or
    # join one, in the transaction that does.
    purgeable = models.BooleanField(default=False, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "end user"
        constraints = [
            models.UniqueConstraint(fields=["bot", "chat_id"], name="user_chat_id_unique"),
        ]
        indexes = [
            models.Index(fields=["bot", "id"], name="user_list_idx"),
            # What the purge looks through: only users who may go, oldest first.
            models.Index(
                fields=["created_at"], name="user_purgeable_idx", condition=models.Q(purgeable=True)
            ),
        ]

    def __str__(self) -> str:
        return self.name or self.id


class Conversation(models.Model):
    id = PrefixedIdField(prefix="conv")
    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="conversations")
    chat_id = models.CharField(max_length=70)
    owner = models.ForeignKey(
        User, on_delete=models.SET_NULL, null=True, blank=True, related_name="owned_conversations"
    )
    # The channel of the integration it happens in (the runtime API's `channel`).
    channel = models.CharField(max_length=200, default=CHAT_CHANNEL)
    tags = models.JSONField(default=dict, blank=True)
    properties = models.JSONField(default=dict, blank=True)
    # The integration that made it (the runtime API's `integration` is its name).
    integration = models.ForeignKey(
        IntegrationInstallation, on_delete=models.SET_NULL, null=True, blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["bot", "chat_id"], name="conversation_chat_id_unique"),
        ]
        indexes = [models.Index(fields=["bot", "id"], name="conversation_list_idx")]

    def __str__(self) -> str:
        return self.id


class Participant(models.Model):
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="participants"
    )
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="participations")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "user"], name="participant_unique"),
        ]
        indexes = [models.Index(fields=["user", "conversation"], name="participant_by_user_idx")]

    def __str__(self) -> str:
        return f"{self.user_id} in {self.conversation_id}"


class Message(models.Model):
    id = PrefixedIdField(prefix="msg")
    # Every index is written on each message: `bot` and `conversation` are
    # indexed by the composites below, which lead with them (and no
    # `varchar_pattern_ops` twin is kept: nothing searches by LIKE).
    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="messages", db_index=False)
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages", db_index=False
    )
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="messages")
    type = models.CharField(max_length=20)
    payload = models.JSONField()
    metadata = models.JSONField(null=True, blank=True)
    tags = models.JSONField(default=dict, blank=True)
    is_bot = models.BooleanField(default=False)
    # "synthetic" when a bot made the message up (the runtime API's `origin`);
    # blank for a message that someone actually sent.
    origin = models.CharField(max_length=20, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(fields=["conversation", "id"], name="message_by_conversation_idx"),
            models.Index(fields=["bot", "id"], name="message_list_idx"),
        ]

    def __str__(self) -> str:
        return self.id
