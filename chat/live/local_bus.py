"""The in-process bus of the embedded defaults: it serves one web process,
and hears what other processes on the machine publish (a worker) through
its relay (relay.py)."""

import asyncio
import threading

from chat.live.relay import SocketRelay
from chat.live.subscriptions import Bus, Inbox


class LocalBus(Bus):
    def __init__(self, relay: SocketRelay | None = None) -> None:
        self._lock = threading.Lock()
        self._inboxes: dict[str, set[Inbox]] = {}
        self._relay = relay

    def publish(self, channel: str, message: str) -> None:
        self._publish_here(channel, message)
        # A process with listeners serves the relay; any other one may be
        # publishing for the listeners of the one that does.
        if self._relay is not None and not self._relay.serving:
            self._relay.send(channel, message)

    def _publish_here(self, channel: str, message: str) -> None:
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
        if self._relay is not None:
            self._relay.serve(self._publish_here)
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
