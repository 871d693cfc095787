"""A bot's end users as the chat interface makes and changes them (`chat_…`,
by chat ids), and as the bot itself does through the runtime API."""

from typing import Any

from django.db import IntegrityError, transaction

from bots.models import Bot, Conversation, User
from bots.selectors.references import integration_reference_get
from chat.event_types import PARTICIPANT_REMOVED
from chat.keys import user_key_issue
from chat.live.publish import stream_publish
from chat.models import ChatConnection
from chat.presenters import participant_stream_json
from chat.selectors.users import chat_user_find
from chat.services.get_or_create import tagged_get_or_create
from platform_site.foundation.credential_invalidation import credentials_changed
from platform_site.foundation.domain_errors import AlreadyExists
from platform_site.foundation.ids import new_id
from platform_site.foundation.lookups import object_get
from platform_site.foundation.tags import TagMatch, tags_changed


def _user_insert(
    *, bot_id: str, chat_id: str | None = None, tags: dict[str, str] | None = None, **fields: Any
) -> User:
    """A new user of the bot. When the caller does not choose a chat id, the
    chat id is the runtime id; a chosen one is in its tags too. IntegrityError
    when the chosen chat id is taken."""
    user_id = new_id("user")
    return User.objects.create(
        id=user_id,
        bot_id=bot_id,
        chat_id=chat_id or user_id,
        tags={**(tags or {}), **({"chat:id": chat_id} if chat_id else {})},
        **fields,
    )


def _chat_user_insert(
    *,
    connection: ChatConnection,
    chat_id: str | None,
    name: str,
    picture_url: str,
    profile: str,
    purgeable: bool = False,
) -> User | None:
    """The new user, or None when the chosen chat id is taken (also by a
    request racing this one)."""
    try:
        with transaction.atomic():
            return _user_insert(
                bot_id=connection.bot_id,
                chat_id=chat_id,
                name=name,
                picture_url=picture_url,
                profile=profile,
                purgeable=purgeable,
            )
    except IntegrityError:
        return None


def chat_user_create(
    *,
    connection: ChatConnection,
    chat_id: str | None = None,
    name: str = "",
    picture_url: str = "",
    profile: str = "",
    purgeable: bool = False,
) -> tuple[User, str]:
    """A user of the connection's bot and a key for it; AlreadyExists when
    the chosen chat id is taken. `purgeable` for a client that showed no
    credential and has no conversation yet: deleted once stale if it never
    takes part in one (chat/services/user_purge.py)."""
    user = _chat_user_insert(
        connection=connection,
        chat_id=chat_id,
        name=name,
        picture_url=picture_url,
        profile=profile,
        purgeable=purgeable,
    )
    if user is None:
        raise AlreadyExists(f"User {chat_id!r} already exists")
    return user, user_key_issue(connection=connection, chat_user_id=user.chat_id)


def chat_user_get_or_create(
    *,
    connection: ChatConnection,
    chat_id: str,
    name: str = "",
    picture_url: str = "",
    profile: str = "",
) -> tuple[User, bool]:
    """The user a signed key names, made on the spot (with the given profile)
    when it does not exist yet; and whether it was made."""
    user = chat_user_find(bot_id=connection.bot_id, chat_id=chat_id)
    if user is not None:
        return user, False
    user = _chat_user_insert(
        connection=connection, chat_id=chat_id, name=name, picture_url=picture_url, profile=profile
    )
    if user is None:
        # A request with the same key made it first.
        return User.objects.get(bot_id=connection.bot_id, chat_id=chat_id), False
    return user, True


# `data` not given, as opposed to given as None (which clears it).
KEEP: Any = object()


def chat_user_update(
    *,
    user: User,
    name: str | None = None,
    picture_url: str | None = None,
    profile: str | None = None,
    data: dict[str, Any] | None = KEEP,
) -> User:
    """Set the fields given (an empty string clears one, and `data` None);
    leave the others."""
    changes = {"name": name, "picture_url": picture_url, "profile": profile}
    return _user_save(user, changes, data=data)


def _user_save(user: User, changes: dict[str, Any], **given: Any) -> User:
    """Set and save the `changes` whose value is not None, and the fields
    `given` whatever their value (None included) unless KEEP."""
    changed = {field: value for field, value in changes.items() if value is not None}
    changed |= {field: value for field, value in given.items() if value is not KEEP}
    if changed:
        for field, value in changed.items():
            setattr(user, field, value)
        user.save(update_fields=[*changed, "updated_at"])
    return user


@transaction.atomic
def user_delete(*, user: User) -> None:
    """Delete the user with their messages (scheduled ones too) and
    participations. Each of their conversations hears that they left;
    conversations they own stay, ownerless."""
    conversations = list(Conversation.objects.filter(participants__user=user).only("chat_id"))
    user.delete()
    credentials_changed()
    for conversation in conversations:
        stream_publish(
            conversation_id=conversation.id,
            type=PARTICIPANT_REMOVED,
            data=participant_stream_json(conversation=conversation, user=user),
        )


def user_create(
    *,
    bot: Bot,
    tags: dict[str, str],
    name: str = "",
    picture_url: str = "",
    properties: dict[str, str] | None = None,
    attributes: dict[str, str] | None = None,
    integration_name: str | None = None,
) -> User:
    """A user the bot makes (its chat id is its runtime id), of the installed
    integration named, if one is. (One INSERT: no transaction needed.)"""
    return _user_insert(
        bot_id=bot.id,
        tags=tags,
        name=name,
        picture_url=picture_url,
        properties=properties or {},
        attributes=attributes or {},
        integration=integration_reference_get(bot_id=bot.id, name=integration_name),
    )


@transaction.atomic
def user_get_or_create(
    *,
    bot: Bot,
    tags: dict[str, str],
    discriminate_by_tags: list[str] | None,
    name: str = "",
    picture_url: str = "",
    properties: dict[str, str] | None = None,
    attributes: dict[str, str] | None = None,
    integration_name: str | None = None,
) -> tuple[User, bool]:
    """The bot's user whose tags match (platform_site.foundation.tags.TagMatch), as
    it is, else a new one as user_create makes it; and whether it was made."""
    return tagged_get_or_create(
        bot=bot,
        candidates=User.objects.filter(bot=bot),
        match=TagMatch(tags, discriminate_by_tags),
        integration_name=integration_name,
        create=lambda: user_create(
            bot=bot,
            tags=tags,
            name=name,
            picture_url=picture_url,
            properties=properties,
            attributes=attributes,
            integration_name=integration_name,
        ),
    )


@transaction.atomic
def user_update(
    *,
    bot: Bot,
    user_id: str,
    name: str | None = None,
    picture_url: str | None = None,
    tags: dict[str, str | None] | None = None,
    properties: dict[str, str | None] | None = None,
    attributes: dict[str, str | None] | None = None,
) -> User:
    """Change a user of the bot: the fields given are set (an empty string
    clears one), the maps given merged (None removes a key); the rest is left."""
    user = object_get(
        User.objects.select_for_update(), object_id=user_id, prefix="user", noun="user", bot=bot
    )
    maps = {"tags": tags, "properties": properties, "attributes": attributes}
    changes: dict[str, Any] = {"name": name, "picture_url": picture_url}
    for field, change in maps.items():
        if change is not None:
            changes[field] = tags_changed(getattr(user, field), change, field=field)
    return _user_save(user, changes)
