"""Publishing to a conversation's listeners: once the writing transaction
commits, so that a listener never hears of something that was rolled back."""

import json
from functools import partial
from typing import Any

from django.db import transaction

from chat.live.bus import conversation_channel, live_bus


def stream_publish(*, conversation_id: str, type: str, data: dict[str, Any]) -> None:
    """Send `{"type": type, "data": data}` to the listeners of the conversation
    whose runtime id is `conversation_id`, after the current transaction
    commits (at once outside a transaction). `data` uses chat ids."""
    # Compact and ASCII: the message is one SSE data line as it is.
    message = json.dumps({"type": type, "data": data}, separators=(",", ":"))
    channel = conversation_channel(conversation_id)
    # Robust: whatever goes wrong is logged, never raised into a request
    # whose change is committed already.
    transaction.on_commit(partial(_publish, channel, message), robust=True)


def _publish(channel: str, message: str) -> None:
    # The bus is looked up once the commit is over, not when the change is made.
    live_bus().publish(channel, message)
