"""The in-process bus of the embedded defaults: it carries only what its own
process publishes, so it serves one web process (with no Celery worker
publishing)."""

import asyncio
import threading

from chat.live.subscriptions import Bus, Inbox


class LocalBus(Bus):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inboxes: dict[str, set[Inbox]] = {}

    def publish(self, channel: str, message: str) -> None:
        with self._lock:
            inboxes = tuple(self._inboxes.get(channel, ()))
        # One hand-over per event loop (a server runs one), not per listener.
        by_loop: dict[asyncio.AbstractEventLoop, list[Inbox]] = {}
        for inbox in inboxes:
            by_loop.setdefault(inbox.loop, []).append(inbox)
        for loop, targets in by_loop.items():
            try:
                loop.call_soon_threadsafe(self._deliver, channel, targets, message)
            except RuntimeError:  # the loop is closed, and its listeners with it
                for inbox in targets:
                    self.leave(channel, inbox)

    def _deliver(self, channel: str, inboxes: list[Inbox], message: str) -> None:
        for inbox in inboxes:
            if not inbox.offer(message):
                self.leave(channel, inbox)

    async def join(self, channel: str, inbox: Inbox) -> None:
        with self._lock:
            self._inboxes.setdefault(channel, set()).add(inbox)

    def leave(self, channel: str, inbox: Inbox) -> None:
        with self._lock:
            inboxes = self._inboxes.get(channel)
            if inboxes is not None:
                inboxes.discard(inbox)
                if not inboxes:
                    del self._inboxes[channel]

    def listener_count(self, channel: str) -> int:
        with self._lock:
            return len(self._inboxes.get(channel, ()))
