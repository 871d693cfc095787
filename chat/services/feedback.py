"""Feedback an end user gives on a message of a conversation they take part
in (the official webchat's thumbs up or down): stored, one per user and
message, and told to the bot as a `message_feedback` event whose payload is
`{messageId, value, comment?}` (`value` null when it is taken back)."""

from typing import Any

from django.db import transaction

from bots.models import Message, User
from chat.event_types import MESSAGE_FEEDBACK
from chat.models import MessageFeedback
from events.services.events import EventReferences, event_record
from platform_site.foundation.domain_errors import NotFound, NotPermitted


@transaction.atomic
def feedback_set(*, user: User, message: Message, value: str, comment: str) -> MessageFeedback:
    """Give or change the user's feedback on a message (one the caller may
    read: chat_message_get), not on one of their own."""
    if message.user_id == user.id:
        raise NotPermitted(f"Message {message.id!r} is the user's own: feedback is on others'")
    feedback, _ = MessageFeedback.objects.update_or_create(
        message=message, user=user, defaults={"value": value, "comment": comment}
    )
    _tell_the_bot(user=user, message=message, value=value, comment=comment)
    return feedback


@transaction.atomic
def feedback_remove(*, user: User, message: Message) -> None:
    removed, _ = MessageFeedback.objects.filter(message=message, user=user).delete()
    if not removed:
        raise NotFound(f"The user gave no feedback on message {message.id!r}")
    _tell_the_bot(user=user, message=message, value=None, comment="")


def _tell_the_bot(*, user: User, message: Message, value: str | None, comment: str) -> None:
    payload: dict[str, Any] = {"messageId": message.id, "value": value}
    if comment:
        payload["comment"] = comment
    event_record(
        bot_id=message.bot_id,
        type=MESSAGE_FEEDBACK,
        payload=payload,
        references=EventReferences(conversation=message.conversation, user=user, message=message),
    )
