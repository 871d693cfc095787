"""What a bot writes through the runtime API's chat routes."""

from typing import Any, cast

from django.db import IntegrityError, transaction

from bots.models import Bot, Conversation, Message, User
from chat.live.publish import stream_publish
from chat.presenters import MESSAGE_CREATED, message_stream_json
from events.services import event_references_resolve
from platform_site.api.errors import ReferenceNotFound
from platform_site.api.ids import new_id


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
) -> Message:
    """A message of the bot in one of its conversations, written as `user_id`:
    any user of the bot (the contract does not ask that they take part), or
    the bot's own id, as hosted-API bots reply (`userId: ctx.botId`).

    It is not an event for the bot (the bot wrote it; hearing of it would
    loop), but the conversation's listeners hear of it once it commits."""
    try:
        with transaction.atomic():
            references = event_references_resolve(
                bot_id=bot.id,
                conversation_id=conversation_id,
                user_id=None if user_id == bot.id else user_id,
            )
            # An id was given: the resolver found it or refused it.
            conversation = cast(Conversation, references.conversation)
            user = references.user or bot_self_user(bot=bot)
            message = Message.objects.create(
                bot=bot,
                conversation=conversation,
                user=user,
                type=payload["type"],
                payload=payload,
                tags=tags,
                origin=origin,
                is_bot=True,
            )
            Conversation.objects.filter(pk=conversation.pk).update(updated_at=message.created_at)
            stream_publish(
                conversation_id=conversation.id,
                type=MESSAGE_CREATED,
                data=message_stream_json(message),
            )
    except IntegrityError:
        # Foreign keys are checked at commit: the conversation or the user
        # was deleted between the lookups and the commit.
        raise ReferenceNotFound(
            "The conversation or the user was deleted while the message was made"
        ) from None
    return message
