"""What a listener receives: server-sent events, every one an unnamed message
(no `event:` line) whose data is `{"type": ..., "data": {...}}`."""

import asyncio
import json
import logging
from collections.abc import AsyncIterator

from chat.event_types import PARTICIPANT_REMOVED
from chat.live.subscriptions import ListenerDropped, Subscription
from platform_site.observability import metrics

logger = logging.getLogger("chat.live")

PING = b'data: {"type":"ping","data":{}}\n\n'


def sse_message(message: str) -> bytes:
    """An unnamed SSE message. Published messages are compact JSON: no line
    break can split their data line."""
    return b"data: " + message.encode() + b"\n\n"


def removes_listener(message: str, participant_id: str) -> bool:
    """Whether the message tells that the listener's own user left the
    conversation (removed, deleted, or the conversation deleted)."""
    if PARTICIPANT_REMOVED not in message:  # spares parsing every message
        return False
    try:
        event = json.loads(message)
    except ValueError:
        return False
    if not isinstance(event, dict) or event.get("type") != PARTICIPANT_REMOVED:
        return False
    data = event.get("data")
    return isinstance(data, dict) and data.get("participantId") == participant_id


async def listener_stream(
    *,
    subscription: Subscription,
    participant_id: str,
    workspace_id: str,
    heartbeat: float,
    first: bytes = PING,
) -> AsyncIterator[bytes]:
    """The stream of one listener, whose subscription is open: `first` (a
    ping, or the webchat's `init`; nothing published from then on is
    missed), then every message, and a ping
    after `heartbeat` seconds of silence. It ends after the message that
    removes the listener, or when the listener fell too far behind; it lets go
    of the subscription however it ends (a client hanging up cancels it)."""
    metrics.live_listener_change(workspace_id=workspace_id, change=1)
    try:
        yield first
        while True:
            try:
                async with asyncio.timeout(heartbeat):
                    message = await subscription.get()
            except TimeoutError:
                yield PING
                continue
            yield sse_message(message)
            if removes_listener(message, participant_id):
                return
    except ListenerDropped as exc:
        # Its client reconnects; until then it misses what it could not take.
        logger.info("live stream: dropped a listener of %s: %s", subscription.channel, exc)
    finally:
        subscription.close()
        metrics.live_listener_change(workspace_id=workspace_id, change=-1)
