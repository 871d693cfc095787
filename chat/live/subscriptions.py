"""A listener's side of the bus: its bounded inbox and its subscription."""

import asyncio
import weakref
from abc import ABC, abstractmethod
from collections import deque

from django.conf import settings


class ListenerDropped(Exception):
    """The listener fell too far behind (LIVE_STREAM_QUEUE_SIZE messages)."""


class Inbox:
    """What one listener has yet to read. Bounded, so that a listener that
    does not keep up costs at most `capacity` messages and is then dropped,
    while every other listener goes on. Touched on `loop` only."""

    def __init__(self, *, capacity: int, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._capacity = capacity
        self._messages: deque[str] = deque()
        self._arrived = asyncio.Event()
        self.dropped = False

    def offer(self, message: str) -> bool:
        """Queue the message; False once the listener is dropped."""
        if self.dropped:
            return False
        if len(self._messages) >= self._capacity:
            self.dropped = True
            self._messages.clear()
        else:
            self._messages.append(message)
        self._arrived.set()
        return not self.dropped

    async def get(self) -> str:
        # Cancellation-safe: a message is taken only once the wait is over.
        while not self._messages:
            if self.dropped:
                raise ListenerDropped(f"fell more than {self._capacity} messages behind")
            self._arrived.clear()
            await self._arrived.wait()
        return self._messages.popleft()


class Bus(ABC):
    """Publishing is synchronous (a request thread or a Celery worker, after
    the commit) and never raises: what it tells of is committed already.
    Listening is asynchronous, one Subscription per listener."""

    @abstractmethod
    def publish(self, channel: str, message: str) -> None:
        """Send to every listener of the channel; from any thread; never raises."""

    @abstractmethod
    async def join(self, channel: str, inbox: Inbox) -> None:
        """Deliver the channel's messages to the inbox: once this returns,
        nothing published afterwards is missed."""

    @abstractmethod
    def leave(self, channel: str, inbox: Inbox) -> None:
        """Stop delivering to the inbox; from any thread; idempotent."""

    @abstractmethod
    def listener_count(self, channel: str) -> int:
        """How many listeners of this process hold the channel."""

    def subscribe(self, channel: str) -> "Subscription":
        """A subscription to the channel, to `open` (or enter) on the listener's loop."""
        return Subscription(bus=self, channel=channel)


class Subscription:
    """A listener's hold on a channel, from `open` to `close`; also an async
    context manager. One dropped without `close` (a response whose stream
    never started) lets go when it is garbage collected."""

    def __init__(self, *, bus: Bus, channel: str) -> None:
        self.channel = channel
        self._bus = bus
        self._inbox: Inbox | None = None
        self._release: weakref.finalize | None = None

    async def open(self) -> "Subscription":
        if self._inbox is not None:
            raise RuntimeError("the subscription is open already")
        inbox = Inbox(capacity=settings.LIVE_STREAM_QUEUE_SIZE, loop=asyncio.get_running_loop())
        self._inbox = inbox
        # Armed before joining, so that a listener cancelled while it joins lets go too.
        self._release = weakref.finalize(self, self._bus.leave, self.channel, inbox)
        self._release.atexit = False
        await self._bus.join(self.channel, inbox)
        return self

    async def get(self) -> str:
        """The next message; ListenerDropped once the listener fell too far behind."""
        if self._inbox is None:
            raise RuntimeError("the subscription is not open")
        return await self._inbox.get()

    def close(self) -> None:
        if self._release is not None:
            self._release()

    async def __aenter__(self) -> "Subscription":
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()
