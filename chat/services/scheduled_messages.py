"""Bot messages sent later: `POST /v1/chat/messages` with a `schedule` stores
a ScheduledMessage, and when it falls due the delivery workers' claim
(events/engine/claims.py) makes it into the message, in the conversation's
lists and on its listeners, with no task of its own: the table says what is
due, as it does for events."""

from datetime import datetime

from django.db import transaction
from django.db.models import Case, DateTimeField, Value, When
from django.db.models.functions import Greatest

from bots.models import Conversation, Message
from chat.event_types import MESSAGE_CREATED
from chat.live.publish import stream_publish
from chat.models import ScheduledMessage
from chat.presenters import message_stream_json

# Scheduled messages made into messages per claim, at most.
PUBLISH_BATCH = 200


def scheduled_message_message(scheduled: ScheduledMessage) -> Message:
    """The message that `scheduled` becomes when it falls due (not saved)."""
    return Message(
        id=scheduled.id,
        bot_id=scheduled.bot_id,
        conversation=scheduled.conversation,
        user=scheduled.user,
        type=scheduled.type,
        payload=scheduled.payload,
        tags=scheduled.tags,
        origin=scheduled.origin,
        is_bot=True,
        created_at=scheduled.due_at,
        updated_at=scheduled.due_at,
    )


def scheduled_messages_publish(*, now: datetime, limit: int = PUBLISH_BATCH) -> int:
    """Make the scheduled messages due at `now` into messages, earliest
    first, and stream them once committed; how many it made. Processes doing
    this at once take different rows (SKIP LOCKED)."""
    with transaction.atomic():
        due = list(
            ScheduledMessage.objects.filter(due_at__lte=now)
            .select_related("conversation", "user")
            .order_by("due_at")
            .select_for_update(skip_locked=True, of=("self",))[:limit]
        )
        if not due:
            return 0
        messages = [scheduled_message_message(scheduled) for scheduled in due]
        Message.objects.bulk_create(messages)
        # A message is created at the time it was due, as its id says (the
        # row's own default would be the time of this claim).
        due_times = Case(
            *(When(pk=s.id, then=Value(s.due_at)) for s in due), output_field=DateTimeField()
        )
        Message.objects.filter(pk__in=[s.id for s in due]).update(
            created_at=due_times, updated_at=due_times
        )
        for message, scheduled in zip(messages, due, strict=True):
            message.created_at = message.updated_at = scheduled.due_at
        latest: dict[str, datetime] = {}
        for scheduled in due:
            latest[scheduled.conversation_id] = scheduled.due_at
        # Locked in the order of their ids, as every process does: two making
        # messages of the same conversations wait for each other, never
        # deadlock (one UPDATE would lock them in whatever order it reads them).
        conversations = Conversation.objects.filter(pk__in=sorted(latest))
        list(conversations.select_for_update().order_by("pk").values_list("pk", flat=True))
        moments = Case(
            *(When(pk=c, then=Value(moment)) for c, moment in latest.items()),
            output_field=DateTimeField(),
        )
        conversations.update(updated_at=Greatest("updated_at", moments))
        ScheduledMessage.objects.filter(pk__in=[s.id for s in due]).delete()
        for message in messages:
            stream_publish(
                conversation_id=message.conversation_id,
                type=MESSAGE_CREATED,
                data=message_stream_json(message),
            )
    return len(due)
