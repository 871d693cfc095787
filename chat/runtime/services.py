"""What a bot writes through the runtime API's chat routes."""

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from bots.models import Bot, Conversation, Message, User
from bots.selectors.references import conversation_reference_get, user_reference_get
from chat.event_types import MESSAGE_CREATED
from chat.live.publish import stream_publish
from chat.models import ScheduledMessage
from chat.presenters import message_stream_json
from chat.runtime.scheduled import scheduled_message_message
from platform_site.api.errors import InvalidPayload, ReferenceNotFound
from platform_site.api.ids import new_id, new_id_at
from platform_site.api.tags import tagged


def bot_self_user(*, bot: Bot) -> User:
    """The user that stands for the bot itself, made the first time it speaks.
    Its chat id holds a `:`, which no caller-chosen chat id may, so no end
    user can take it and pass for the bot."""
    user, _ = User.objects.get_or_create(
        bot=bot,
        chat_id=f"bot:{bot.id}",
        defaults={"id": new_id("user"), "name": bot.name, "tags": {"role": "bot"}},
    )
    return user


def bot_message_create(
    *,
    bot: Bot,
    conversation_id: str,
    user_id: str,
    payload: dict[str, Any],
    tags: dict[str, str],
    origin: str = "",
    due_at: datetime | None = None,
) -> Message:
    """A message of the bot in one of its conversations, written as `user_id`:
    any user of the bot (the contract does not ask that they take part), or
    the bot's own id, as hosted-API bots reply (`userId: ctx.botId`).

    It is not an event for the bot (the bot wrote it; hearing of it would
    loop), but the conversation's listeners hear of it once it commits. With
    a `due_at` still to come, it is stored to be made then (scheduled.py),
    and what is answered is the message it will be."""
    try:
        with transaction.atomic():
            return _message_create(
                bot=bot,
                conversation=_conversation(bot, conversation_id),
                user_id=user_id,
                payload=payload,
                tags=tags,
                origin=origin,
                due_at=due_at,
            )
    except IntegrityError:
        raise _deleted_meanwhile() from None


def bot_message_get_or_create(
    *,
    bot: Bot,
    conversation_id: str,
    user_id: str,
    payload: dict[str, Any] | None,
    tags: dict[str, str],
    discriminate_by_tags: list[str] | None,
    origin: str = "",
    due_at: datetime | None = None,
) -> tuple[Message, bool]:
    """The bot's message in the conversation whose tags match, sent or still
    scheduled, else a new one as bot_message_create makes it; and whether it
    was made. Tags match when every tag of `discriminate_by_tags` has the
    same value (or is absent from both), or, without that list, when the tags
    are the same. With no tag to match on, nothing identifies an earlier
    message: a new one is made."""
    try:
        with transaction.atomic():
            conversation = _conversation(bot, conversation_id)
            # Requests for the same conversation take turns, so that two of
            # them never both make the message.
            Conversation.objects.select_for_update().filter(pk=conversation.pk).exists()
            existing = _tagged_message(conversation, tags, discriminate_by_tags)
            if existing is not None:
                return existing, False
            if payload is None:
                raise InvalidPayload("payload: Required when no message matches the tags.")
            message = _message_create(
                bot=bot,
                conversation=conversation,
                user_id=user_id,
                payload=payload,
                tags=tags,
                origin=origin,
                due_at=due_at,
            )
            return message, True
    except IntegrityError:
        raise _deleted_meanwhile() from None


def _conversation(bot: Bot, conversation_id: str) -> Conversation:
    # An id was given: the resolver finds it or refuses it.
    return conversation_reference_get(bot_id=bot.id, conversation_id=conversation_id)


def _message_create(
    *,
    bot: Bot,
    conversation: Conversation,
    user_id: str,
    payload: dict[str, Any],
    tags: dict[str, str],
    origin: str,
    due_at: datetime | None,
) -> Message:
    if user_id == bot.id:
        user = bot_self_user(bot=bot)
    else:
        user = user_reference_get(bot_id=bot.id, user_id=user_id)
    fields: dict[str, Any] = {
        "bot": bot,
        "conversation": conversation,
        "user": user,
        "type": payload["type"],
        "payload": payload,
        "tags": tags,
        "origin": origin,
    }
    if due_at is not None and due_at > timezone.now():
        scheduled = ScheduledMessage.objects.create(
            id=new_id_at("msg", due_at), due_at=due_at, **fields
        )
        return scheduled_message_message(scheduled)
    message = Message.objects.create(is_bot=True, **fields)
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=message.created_at)
    stream_publish(
        conversation_id=conversation.id,
        type=MESSAGE_CREATED,
        data=message_stream_json(message),
    )
    return message


def _tagged_message(
    conversation: Conversation, tags: dict[str, str], keys: list[str] | None
) -> Message | None:
    def matches(candidate: dict[str, str]) -> bool:
        if keys is None:
            return candidate == tags
        return all(candidate.get(key) == tags.get(key) for key in keys)

    # The query narrows to the tags that must be there; matches() decides.
    wanted = {key: value for key, value in tags.items() if keys is None or key in keys}
    if not (tags if keys is None else keys):
        return None
    for message in tagged(Message.objects.filter(conversation=conversation), wanted).order_by("id"):
        if matches(message.tags):
            return message
    scheduled = tagged(ScheduledMessage.objects.filter(conversation=conversation), wanted)
    for candidate in scheduled.select_related("conversation", "user").order_by("id"):
        if matches(candidate.tags):
            return scheduled_message_message(candidate)
    return None


def _deleted_meanwhile() -> ReferenceNotFound:
    # Foreign keys are checked at commit: the conversation or the user was
    # deleted between the lookups and the commit.
    return ReferenceNotFound("The conversation or the user was deleted while the message was made")
