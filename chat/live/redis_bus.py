"""Redis publish/subscribe: what any process publishes (a web process or a
Celery worker) reaches the listeners of every web process.

A process publishes through a pool of synchronous connections. It listens
through one pub/sub connection per event loop (an ASGI server runs one): a
channel is subscribed when the first local listener of its conversation
arrives and unsubscribed when the last one leaves, and one reader task fans
each message out to the local inboxes. When Redis goes away, listeners stay
connected (their heartbeats go on) while the connection is made again with
backoff; what is published meanwhile is lost, as publish/subscribe does."""

import asyncio
import contextlib
import contextvars
import logging
import os
import threading

import redis
from redis import asyncio as redis_asyncio
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.connection import parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.retry import Retry

from chat.live.subscriptions import Bus, Inbox

logger = logging.getLogger("chat.live")

# Publishing runs in a request, after its commit, or in a task: a Redis outage
# must not hold it long. The one retry replaces a pooled connection that Redis
# closed in the meantime.
PUBLISH_TIMEOUT = 1.0
CONNECT_TIMEOUT = 5.0
# How long a new listener waits for Redis to confirm its subscription; past
# that (Redis is down) it is answered anyway and hears what comes once Redis is back.
SUBSCRIBE_TIMEOUT = 5.0
# After this many seconds of silence the reader pings Redis, and it takes the
# connection for dead when as many more pass without an answer.
PING_INTERVAL = 10.0
RECONNECT_MIN_DELAY = 0.5
RECONNECT_MAX_DELAY = 30.0


class RedisBus(Bus):
    def __init__(self, url: str) -> None:
        self._url = url
        # Publish/subscribe ignores the database number, so channels carry it:
        # deployments or test runs sharing a Redis on different databases do
        # not hear each other.
        self._prefix = f"db{parse_url(url).get('db', 0)}:"
        self._publisher = redis.Redis.from_url(
            url,
            socket_timeout=PUBLISH_TIMEOUT,
            socket_connect_timeout=PUBLISH_TIMEOUT,
            retry=Retry(NoBackoff(), 1),
        )
        self._hubs: dict[asyncio.AbstractEventLoop, _Hub] = {}
        self._lock = threading.Lock()

    def publish(self, channel: str, message: str) -> None:
        try:
            self._publisher.publish(self._prefix + channel, message)
        except (RedisError, OSError) as exc:
            logger.warning("live stream: could not publish to %s: %s", channel, exc)

    async def join(self, channel: str, inbox: Inbox) -> None:
        await self._hub(inbox.loop).join(self._prefix + channel, inbox)

    def leave(self, channel: str, inbox: Inbox) -> None:
        hub = self._hubs.get(inbox.loop)
        if hub is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is inbox.loop:
            hub.leave(self._prefix + channel, inbox)
        else:  # garbage collected elsewhere: the hub is the loop's alone
            with contextlib.suppress(RuntimeError):  # the loop is closed, its listeners gone
                inbox.loop.call_soon_threadsafe(hub.leave, self._prefix + channel, inbox)

    def listener_count(self, channel: str) -> int:
        with self._lock:
            hubs = list(self._hubs.values())
        return sum(hub.listener_count(self._prefix + channel) for hub in hubs)

    def _hub(self, loop: asyncio.AbstractEventLoop) -> "_Hub":
        with self._lock:
            for closed in [known for known in self._hubs if known.is_closed()]:
                del self._hubs[closed]
            hub = self._hubs.get(loop)
            if hub is None:
                hub = self._hubs[loop] = _Hub(self._url)
            return hub


class _Hub:
    """The pub/sub connection of one event loop and the local listeners of
    each channel. Used on that loop only."""

    def __init__(self, url: str) -> None:
        self._client = redis_asyncio.Redis.from_url(
            url,
            decode_responses=True,
            socket_connect_timeout=CONNECT_TIMEOUT,
            socket_keepalive=True,
            # So that CLIENT LIST tells which connection listens for which process.
            client_name=f"live-stream-{os.getpid()}",
            # Reconnection is the reader's own (with backoff, resubscribing).
            retry=AsyncRetry(NoBackoff(), 0),
        )
        self._listeners: dict[str, set[Inbox]] = {}
        # Set once Redis confirmed the latest SUBSCRIBE sent for the channel.
        self._ready: dict[str, asyncio.Event] = {}
        # On the current connection: the channels whose latest command was
        # SUBSCRIBE, and the confirmations of SUBSCRIBE still to come. Redis
        # answers in order, so the last one due is that of the latest command.
        self._subscribed: set[str] = set()
        self._confirmations_due: dict[str, int] = {}
        self._changed = asyncio.Event()
        # The pub/sub connection of the current session.
        self._pubsub: PubSub | None = None
        # Whether the last attempt to reach Redis failed.
        self._down = False
        # A context of its own: the task outlives the request that started it.
        self._task = asyncio.get_running_loop().create_task(
            self._run(), context=contextvars.Context()
        )

    async def join(self, channel: str, inbox: Inbox) -> None:
        self._listeners.setdefault(channel, set()).add(inbox)
        self._changed.set()
        if self._down:
            # Nothing to wait for: the channel is subscribed once Redis is back.
            return
        ready = self._ready.setdefault(channel, asyncio.Event())
        try:
            async with asyncio.timeout(SUBSCRIBE_TIMEOUT):
                await ready.wait()
        except TimeoutError:
            logger.warning(
                "live stream: Redis did not confirm the subscription to %s within %s s;"
                " the listener is answered anyway",
                channel,
                SUBSCRIBE_TIMEOUT,
            )

    def leave(self, channel: str, inbox: Inbox) -> None:
        listeners = self._listeners.get(channel)
        if listeners is None or inbox not in listeners:
            return
        listeners.remove(inbox)
        if not listeners:
            del self._listeners[channel]
            self._changed.set()

    def listener_count(self, channel: str) -> int:
        return len(self._listeners.get(channel, ()))

    async def _run(self) -> None:
        delay = RECONNECT_MIN_DELAY
        while True:
            pubsub = self._pubsub = self._client.pubsub()
            try:
                await pubsub.connect()
                if self._down:
                    logger.info("live stream: connected to Redis again")
                self._down = False
                delay = RECONNECT_MIN_DELAY
                await self._session(pubsub)
            except (RedisError, OSError) as exc:
                logger.warning("live stream: lost Redis (%s); again in %.1f s", exc, delay)
            except Exception:
                # Listeners must not go deaf for good: log and start over.
                logger.exception("live stream: the Redis reader failed; again in %.1f s", delay)
            finally:
                self._pubsub = None
                self._down = True
                self._subscribed.clear()
                self._confirmations_due.clear()
                # Listeners waiting for a confirmation are answered now.
                for ready in self._ready.values():
                    ready.set()
                self._ready.clear()
                # Bounded: a close stuck behind the connection's lock must not
                # keep the reader from connecting again (or from being cancelled).
                with contextlib.suppress(RedisError, OSError, TimeoutError):
                    async with asyncio.timeout(CONNECT_TIMEOUT):
                        await pubsub.aclose()
            await asyncio.sleep(delay)
            delay = min(2 * delay, RECONNECT_MAX_DELAY)

    async def _session(self, pubsub: PubSub) -> None:
        """One connection's life: ends with the error that broke it."""
        self._changed.set()  # subscribe to every channel that has listeners
        tasks = [
            asyncio.ensure_future(self._write(pubsub)),
            asyncio.ensure_future(self._read(pubsub)),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
        finally:
            for task in tasks:
                task.cancel()
            # Bounded: on Python 3.11 a cancellation that meets a timeout inside
            # redis-py can be swallowed; a writer that outlives its session
            # then ends by itself at its next wake-up (see _write).
            await asyncio.wait(tasks, timeout=CONNECT_TIMEOUT)

    async def _write(self, pubsub: PubSub) -> None:
        """Bring the connection's subscriptions in line with the local listeners."""
        while True:
            await self._changed.wait()
            if pubsub is not self._pubsub:
                return  # its session is over; the change is the next one's
            self._changed.clear()
            wanted = set(self._listeners)
            stale = self._subscribed - wanted
            if stale:
                self._subscribed -= stale
                for channel in stale:
                    self._ready.pop(channel, None)
                await pubsub.unsubscribe(*stale)
            new = wanted - self._subscribed
            if new:
                self._subscribed |= new
                for channel in new:
                    self._confirmations_due[channel] = self._confirmations_due.get(channel, 0) + 1
                    self._ready.setdefault(channel, asyncio.Event())
                await pubsub.subscribe(*new)

    async def _read(self, pubsub: PubSub) -> None:
        pinged = False
        while True:
            message = await pubsub.get_message(timeout=PING_INTERVAL)
            if message is None:
                if pinged:
                    raise RedisConnectionError(f"no answer to a ping within {PING_INTERVAL} s")
                await pubsub.ping()
                pinged = True
                continue
            pinged = False
            if message["type"] == "message":
                self._deliver(message["channel"], message["data"])
            elif message["type"] == "subscribe":
                self._confirm(message["channel"])

    def _deliver(self, channel: str, message: str) -> None:
        for inbox in tuple(self._listeners.get(channel, ())):
            if not inbox.offer(message):
                self.leave(channel, inbox)

    def _confirm(self, channel: str) -> None:
        due = self._confirmations_due.get(channel, 0) - 1
        if due > 0:
            self._confirmations_due[channel] = due
            return
        self._confirmations_due.pop(channel, None)
        ready = self._ready.get(channel)
        if ready is not None and channel in self._subscribed:
            ready.set()
