"""The feedback an end user gave on messages (chat/services/feedback.py)."""

from bots.models import User
from chat.models import MessageFeedback


def feedback_by_message(*, user: User, message_ids: list[str]) -> dict[str, MessageFeedback]:
    """The user's feedback on each of these messages that has one."""
    rows = MessageFeedback.objects.filter(user=user, message_id__in=message_ids)
    return {feedback.message_id: feedback for feedback in rows}
