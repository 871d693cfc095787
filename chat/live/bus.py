"""Which bus carries the live stream, and the channel of a conversation."""

import threading

from django.conf import settings

from chat.live.local_bus import LocalBus
from chat.live.redis_bus import RedisBus
from chat.live.relay import SocketRelay
from chat.live.subscriptions import Bus

_local_bus = LocalBus(SocketRelay(settings.DATA_DIR / "live-stream.sock"))
_redis_buses: dict[str, RedisBus] = {}
_redis_buses_lock = threading.Lock()


def conversation_channel(conversation_id: str) -> str:
    """The channel of a conversation, named by its runtime id."""
    return f"chat:conversation:{conversation_id}"


def live_bus() -> Bus:
    """Redis publish/subscribe when LIVE_STREAM_REDIS_URL is set, else the
    in-process bus. Settings are read on each call, so a test may switch."""
    url: str = settings.LIVE_STREAM_REDIS_URL
    if not url:
        return _local_bus
    with _redis_buses_lock:
        bus = _redis_buses.get(url)
        if bus is None:
            bus = _redis_buses[url] = RedisBus(url)
        return bus
