"""The feedback an end user gave on messages (chat/services/feedback.py), read
with the messages themselves: two subqueries on the (message, user) key in
the messages' own statement, rather than a statement of its own."""

from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery

from bots.models import Message, User
from chat.models import MessageFeedback


def with_feedback(messages: QuerySet[Message], *, user: User) -> QuerySet[Message]:
    """The messages, each with the user's feedback on it (feedback_json)."""
    given = MessageFeedback.objects.filter(message=OuterRef("pk"), user=user)
    return messages.annotate(
        feedback_value=Subquery(given.values("value")[:1]),
        feedback_comment=Subquery(given.values("comment")[:1]),
    )


def feedback_json(message: Message) -> dict[str, Any] | None:
    """`{value, comment?}` of a message read through with_feedback, None
    when the user gave none."""
    value = getattr(message, "feedback_value", None)
    if value is None:
        return None
    body = {"value": value}
    comment = getattr(message, "feedback_comment", "")
    if comment:
        body["comment"] = comment
    return body
