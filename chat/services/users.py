"""A bot's end users as the chat interface makes, changes and deletes them."""

from django.db import IntegrityError, transaction

from bots.credential_invalidation import credentials_changed
from bots.models import Conversation, User
from chat.event_types import PARTICIPANT_REMOVED
from chat.keys import user_key_issue
from chat.live.publish import stream_publish
from chat.models import ChatConnection
from chat.presenters import participant_stream_json
from chat.selectors.users import chat_user_find
from platform_site.api.ids import new_id
from platform_site.domain_errors import AlreadyExists


def _user_insert(
    *, connection: ChatConnection, chat_id: str | None, name: str, picture_url: str, profile: str
) -> User | None:
    """The new user, or None when the chosen chat id is taken (also by a
    request racing this one). When the caller does not choose a chat id, the
    chat id is the runtime id."""
    user_id = new_id("user")
    try:
        with transaction.atomic():
            return User.objects.create(
                id=user_id,
                bot_id=connection.bot_id,
                chat_id=chat_id or user_id,
                name=name,
                picture_url=picture_url,
                profile=profile,
                tags={"chat:id": chat_id} if chat_id else {},
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
) -> tuple[User, str]:
    """A user of the connection's bot and a key for it; AlreadyExists when
    the chosen chat id is taken."""
    user = _user_insert(
        connection=connection, chat_id=chat_id, name=name, picture_url=picture_url, profile=profile
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
    user = _user_insert(
        connection=connection, chat_id=chat_id, name=name, picture_url=picture_url, profile=profile
    )
    if user is None:
        # A request with the same key made it first.
        return User.objects.get(bot_id=connection.bot_id, chat_id=chat_id), False
    return user, True


def chat_user_update(
    *,
    user: User,
    name: str | None = None,
    picture_url: str | None = None,
    profile: str | None = None,
) -> User:
    """Set the fields given (an empty string clears one); leave the others."""
    changes = {"name": name, "picture_url": picture_url, "profile": profile}
    changed = [field for field, value in changes.items() if value is not None]
    if changed:
        for field in changed:
            setattr(user, field, changes[field])
        user.save(update_fields=[*changed, "updated_at"])
    return user


@transaction.atomic
def chat_user_delete(*, user: User) -> None:
    """Delete the user with their messages and participations. Each of their
    conversations hears that they left; conversations they own stay, ownerless."""
    conversations = list(Conversation.objects.filter(participants__user=user).only("chat_id"))
    user.delete()
    credentials_changed()
    for conversation in conversations:
        stream_publish(
            conversation_id=conversation.id,
            type=PARTICIPANT_REMOVED,
            data=participant_stream_json(conversation=conversation, user=user),
        )
