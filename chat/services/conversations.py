"""Conversations as the chat interface makes and deletes them (by chat ids,
owned by their creator), and as the bot itself does through the runtime API
(`bot_…`: no owner, no participants until the bot adds them)."""

from django.db import IntegrityError, transaction

from bots.models import Bot, Conversation, Participant, User
from bots.selectors.references import integration_reference_get
from chat.event_types import PARTICIPANT_REMOVED
from chat.live.publish import stream_publish
from chat.presenters import participant_stream_json
from chat.selectors.conversations import chat_conversation_find, conversation_get
from chat.services.get_or_create import tagged_get_or_create
from chat.services.user_purge import user_engaged
from platform_site.foundation.domain_errors import AlreadyExists, NotPermitted
from platform_site.foundation.ids import new_id
from platform_site.foundation.tags import TagMatch, tags_changed


@transaction.atomic
def conversation_create(*, creator: User, chat_id: str | None = None) -> Conversation:
    """A conversation whose creator is its owner and first participant;
    AlreadyExists when the chosen chat id is taken (also by a racing request)."""
    user_engaged(user=creator)
    conversation_id = new_id("conv")
    try:
        with transaction.atomic():
            conversation = Conversation.objects.create(
                id=conversation_id,
                bot_id=creator.bot_id,
                chat_id=chat_id or conversation_id,
                owner=creator,
                tags={"chat:id": chat_id} if chat_id else {},
            )
    except IntegrityError:
        raise AlreadyExists(f"Conversation {chat_id!r} already exists") from None
    Participant.objects.create(conversation=conversation, user=creator)
    return conversation


@transaction.atomic
def conversation_get_or_create(*, user: User, chat_id: str) -> tuple[Conversation, bool]:
    """The conversation with this chat id, which the user must take part in,
    or a new one they own; and whether it was made."""
    conversation = chat_conversation_find(user=user, chat_id=chat_id)
    if conversation is not None:
        return conversation, False
    try:
        return conversation_create(creator=user, chat_id=chat_id), True
    except AlreadyExists:
        # A request with the same id made it first: answer as if found.
        found = chat_conversation_find(user=user, chat_id=chat_id)
        if found is None:
            raise
        return found, False


def owner_only(*, user: User, conversation: Conversation, action: str) -> None:
    if conversation.owner_id != user.id:
        raise NotPermitted(f"Only the owner of conversation {conversation.chat_id!r} may {action}")


@transaction.atomic
def conversation_delete(*, user: User, conversation: Conversation) -> None:
    """Delete a conversation the user owns, as bot_conversation_delete does."""
    owner_only(user=user, conversation=conversation, action="delete it")
    bot_conversation_delete(conversation=conversation)


@transaction.atomic
def bot_conversation_delete(*, conversation: Conversation) -> None:
    """Delete a conversation with its messages (scheduled ones too) and
    participations. Every participant's listeners hear that they were
    removed, which ends their streams."""
    participants = list(User.objects.filter(participations__conversation=conversation))
    conversation_id = conversation.id  # delete() clears the primary key
    conversation.delete()
    for participant in participants:
        stream_publish(
            conversation_id=conversation_id,
            type=PARTICIPANT_REMOVED,
            data=participant_stream_json(conversation=conversation, user=participant),
        )


def bot_conversation_create(
    *,
    bot: Bot,
    channel: str,
    tags: dict[str, str],
    properties: dict[str, str] | None = None,
    integration_name: str | None = None,
) -> Conversation:
    """A conversation the bot makes in a channel, of the installed
    integration named, if one is: no owner, no participants (the bot adds
    them), its chat id its runtime id. (One INSERT: no transaction needed.)"""
    conversation_id = new_id("conv")
    return Conversation.objects.create(
        id=conversation_id,
        bot=bot,
        chat_id=conversation_id,
        channel=channel,
        tags=tags,
        properties=properties or {},
        integration=integration_reference_get(bot_id=bot.id, name=integration_name),
    )


@transaction.atomic
def bot_conversation_get_or_create(
    *,
    bot: Bot,
    channel: str,
    tags: dict[str, str],
    discriminate_by_tags: list[str] | None,
    properties: dict[str, str] | None = None,
    integration_name: str | None = None,
) -> tuple[Conversation, bool]:
    """The bot's conversation in this channel whose tags match
    (platform_site.foundation.tags.TagMatch), as it is, else a new one as
    bot_conversation_create makes it; and whether it was made. A conversation of
    another channel is another conversation, whatever its tags."""
    return tagged_get_or_create(
        bot=bot,
        candidates=Conversation.objects.filter(bot=bot, channel=channel).select_related(
            "integration__integration"
        ),
        match=TagMatch(tags, discriminate_by_tags),
        integration_name=integration_name,
        create=lambda: bot_conversation_create(
            bot=bot,
            channel=channel,
            tags=tags,
            properties=properties,
            integration_name=integration_name,
        ),
    )


@transaction.atomic
def bot_conversation_update(
    *,
    bot: Bot,
    conversation_id: str,
    tags: dict[str, str | None] | None = None,
    properties: dict[str, str | None] | None = None,
) -> Conversation:
    """Merge changes into a conversation's tags and properties (None removes a key)."""
    conversation = conversation_get(bot=bot, conversation_id=conversation_id, for_update=True)
    if tags is not None:
        conversation.tags = tags_changed(conversation.tags, tags, field="tags")
    if properties is not None:
        conversation.properties = tags_changed(
            conversation.properties, properties, field="properties"
        )
    conversation.save(update_fields=["tags", "properties", "updated_at"])
    return conversation
