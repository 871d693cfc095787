"""Custom events users sent in conversations, as the chat interface shows them."""

from bots.models import User
from chat.event_types import CUSTOM_EVENT
from chat.selectors.participants import participant_object_get
from events.models import Event


def chat_event_get(*, user: User, event_id: str) -> Event:
    """A custom event of a user in a conversation the caller takes part in.
    The bot's other events (such as message_created, whose payload holds
    runtime ids) are not the chat interface's to show."""
    return participant_object_get(
        Event.objects.select_related("user", "conversation").filter(
            type=CUSTOM_EVENT, conversation__isnull=False, user__isnull=False
        ),
        user=user,
        object_id=event_id,
        prefix="evt",
        noun="event",
    )
