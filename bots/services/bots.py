"""A workspace's bots: made, changed, deleted, their signing secret rotated.
Each change leaves an audit record in its own transaction."""

import hashlib
import json
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from bots.actors import PLATFORM, Actor
from bots.models import AuditAction, Bot, DeliveryFormat, User, Workspace
from bots.models.bot import new_signing_secret
from bots.selectors.references import user_by_chat_id
from bots.services.audit_records import audit_record_add, changed_fields
from platform_site.foundation.credential_invalidation import credentials_changed
from platform_site.foundation.domain_errors import InvalidValue
from platform_site.foundation.ids import new_id

# The chat id of the user standing for a bot: it holds a `:`, which no
# caller-chosen chat id may, so no end user can take it and pass for the bot.
BOT_USER_CHAT_ID_PREFIX = "bot:"

# What an update may change, by model field; the audit record names these.
BOT_UPDATABLE_FIELDS = (
    "name",
    "tags",
    "dev",
    "webhook_url",
    "delivery_format",
    "max_execution_time",
    "configuration",
)


def _bot_fields(bot: Bot) -> dict[str, Any]:
    fields = {name: getattr(bot, name) for name in BOT_UPDATABLE_FIELDS}
    # The audit record says that the configuration changed, not what it
    # holds: a bot's settings may be nobody else's business.
    fields["configuration"] = _fingerprint(bot.configuration)
    return fields


def _fingerprint(value: Any) -> str:
    encoded = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(encoded).hexdigest()[:16]


@transaction.atomic
def bot_create(
    *,
    workspace: Workspace,
    name: str,
    tags: dict[str, str] | None = None,
    dev: bool = False,
    webhook_url: str = "",
    delivery_format: str = DeliveryFormat.STANDARD,
    max_execution_time: int | None = None,
    configuration: dict[str, Any] | None = None,
    actor: Actor = PLATFORM,
) -> Bot:
    bot = Bot(
        workspace=workspace,
        name=name,
        tags=tags or {},
        dev=dev,
        webhook_url=webhook_url,
        delivery_format=delivery_format,
        max_execution_time=max_execution_time,
        configuration=configuration or {},
    )
    _bot_clean(bot)
    bot.save()
    _bot_user_for_format(bot)
    audit_record_add(
        actor,
        action=AuditAction.BOT_CREATED,
        target_type="bot",
        target_id=bot.id,
        workspace=workspace,
        changes=changed_fields({}, _bot_fields(bot)),
    )
    return bot


@transaction.atomic
def bot_update(*, bot: Bot, actor: Actor = PLATFORM, **fields: Any) -> Bot:
    """Change the named fields (of BOT_UPDATABLE_FIELDS); the record holds
    what changed, and nothing is written when nothing did."""
    unknown = set(fields) - set(BOT_UPDATABLE_FIELDS)
    if unknown:
        raise TypeError(f"bot_update cannot change {sorted(unknown)}")
    before = _bot_fields(bot)
    for name, value in fields.items():
        setattr(bot, name, value)
    changes = changed_fields(before, _bot_fields(bot))
    if not changes:
        return bot
    _bot_clean(bot)
    bot.save(update_fields=[*changes, "updated_at"])
    _bot_user_for_format(bot)
    audit_record_add(
        actor,
        action=AuditAction.BOT_UPDATED,
        target_type="bot",
        target_id=bot.id,
        workspace=bot.workspace,
        changes=changes,
    )
    return bot


def _bot_clean(bot: Bot) -> None:
    try:
        bot.full_clean()
    except ValidationError as invalid:
        raise InvalidValue(
            "; ".join(
                f"{field}: {' '.join(errors)}" for field, errors in invalid.message_dict.items()
            )
        ) from None


def _bot_user_for_format(bot: Bot) -> None:
    # An SDK bot is told, with every delivery, which user stands for it
    # (x-bot-user-id): it exists from the moment the bot is in that format.
    if bot.delivery_format == DeliveryFormat.BOTPRESS:
        bot_user_get_or_create(bot=bot)


@transaction.atomic
def bot_delete(*, bot: Bot, actor: Actor = PLATFORM) -> None:
    """Delete the bot and everything it owns (events, files, conversations)."""
    audit_record_add(
        actor,
        action=AuditAction.BOT_DELETED,
        target_type="bot",
        target_id=bot.id,
        workspace=bot.workspace,
        changes={"name": bot.name},
    )
    bot.delete()
    # Its tokens' grants, chat connections and chat users go with it.
    credentials_changed()


@transaction.atomic
def bot_signing_secret_rotate(*, bot: Bot, actor: Actor = PLATFORM) -> Bot:
    """Give the bot a new webhook signing secret. The old one keeps signing
    deliveries beside it for WEBHOOK_SECRET_OVERLAP_SECONDS, so the bot can
    switch to the new secret without refusing a delivery in between."""
    now = timezone.now()
    bot.previous_signing_secret = bot.signing_secret
    bot.previous_signing_secret_expires_at = now + timedelta(
        seconds=settings.WEBHOOK_SECRET_OVERLAP_SECONDS
    )
    bot.signing_secret = new_signing_secret()
    bot.save(
        update_fields=[
            "signing_secret",
            "previous_signing_secret",
            "previous_signing_secret_expires_at",
            "updated_at",
        ]
    )
    # Never the secrets themselves: only when the old one stops signing.
    audit_record_add(
        actor,
        action=AuditAction.BOT_SECRET_ROTATED,
        target_type="bot",
        target_id=bot.id,
        workspace=bot.workspace,
        changes={"previousSecretExpiresAt": bot.previous_signing_secret_expires_at.isoformat()},
    )
    return bot


def bot_user_get_or_create(*, bot: Bot) -> User:
    """The user that stands for the bot itself, made the first time it speaks
    or when it is set to be delivered in `botpress` format (x-bot-user-id).

    Read by one plain SELECT, as it is on every reply but the first; the
    defaults are only made on a miss (the bot a request authenticates with
    may not have its name loaded, and reading it would cost a query)."""
    chat_id = BOT_USER_CHAT_ID_PREFIX + bot.id
    user = user_by_chat_id(bot_id=bot.id, chat_id=chat_id)
    if user is None:
        user, _ = User.objects.get_or_create(
            bot=bot,
            chat_id=chat_id,
            defaults={
                "id": lambda: new_id("user"),
                "name": lambda: bot.name,
                "tags": {"role": "bot"},
            },
        )
    return user
