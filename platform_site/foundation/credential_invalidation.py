"""Telling every process that a cached credential answer changed.

A write that changes what a token, chat connection or chat user stands for
calls `credentials_changed()`: this process forgets its answers at once and
again after the commit, and then every process subscribed on Redis
(LIVE_STREAM_REDIS_URL, channel `credentials:invalidate`) forgets its own.
Each process subscribes from a daemon thread of its own, started on first use
and made again after a fork; it reconnects with backoff, and while it is not
connected `listening_since()` is None, so the cache trusts nothing longer than
its short rule. Without Redis there is no subscriber, only that rule."""

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from django.conf import settings
from django.db import transaction
from redis.backoff import NoBackoff
from redis.connection import parse_url
from redis.exceptions import RedisError
from redis.retry import Retry

logger = logging.getLogger("platform_site.api.credentials")

CHANNEL = "credentials:invalidate"
SUBSCRIBER_THREAD = "credentials-invalidation"
# Publishing runs after a write's commit, in its request: a Redis outage must
# not hold it long.
PUBLISH_TIMEOUT = 1.0
CONNECT_TIMEOUT = 2.0
# The subscriber pings this often, and takes the connection for dead (and the
# process for deaf) when Redis has said nothing for SILENCE_LIMIT seconds: a
# connection can die without an error reaching this end.
PING_INTERVAL = 0.5
SILENCE_LIMIT = 1.5
READ_TIMEOUT = 0.25
RECONNECT_MIN_DELAY = 0.1
RECONNECT_MAX_DELAY = 10.0

_handlers: list[Callable[[], None]] = []


def on_invalidation(handler: Callable[[], None]) -> None:
    """Call `handler` whenever cached credentials must be forgotten, whoever
    changed them: this process or another."""
    _handlers.append(handler)


def _forget() -> None:
    for handler in _handlers:
        handler()


def channel_name(url: str) -> str:
    # Publish/subscribe ignores the database number: deployments or test runs
    # sharing a Redis on different databases must not hear each other.
    return f"db{parse_url(url).get('db', 0)}:{CHANNEL}"


class Subscriber(threading.Thread):
    """The invalidation channel's listener of one process."""

    def __init__(self, url: str, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(name=SUBSCRIBER_THREAD, daemon=True)
        self.url = url
        self.pid = os.getpid()
        self._clock = clock
        self._stopping = threading.Event()
        # Set when Redis confirms the subscription, None whenever it may not hold.
        self._subscribed_at: float | None = None
        self._subscribed = False  # during the current connection, at some point
        self._last_heard = 0.0

    def listening_since(self) -> float | None:
        """Since when every invalidation published has reached this process
        (or will as soon as this thread reads it); None when some may not."""
        since = self._subscribed_at
        if since is None or self._clock() - self._last_heard > SILENCE_LIMIT:
            return None
        return since

    def stop(self) -> None:
        self._stopping.set()

    def run(self) -> None:
        delay = RECONNECT_MIN_DELAY
        warned = False
        while not self._stopping.is_set():
            self._subscribed = False
            try:
                self._listen()
            except (RedisError, OSError, ValueError) as exc:
                if self._subscribed or not warned:
                    logger.warning("credentials: invalidation subscriber disconnected: %s", exc)
                warned = True
            except Exception:
                # The thread must outlive any surprise: without it every answer
                # is trusted for a second only.
                logger.exception("credentials: invalidation subscriber failed")
            finally:
                self._subscribed_at = None
            if self._subscribed:  # it was up: the next try comes at once
                delay = RECONNECT_MIN_DELAY
                warned = False
            self._stopping.wait(delay)
            delay = min(delay * 2, RECONNECT_MAX_DELAY)

    def _listen(self) -> None:
        client = redis.Redis.from_url(
            self.url,
            socket_connect_timeout=CONNECT_TIMEOUT,
            socket_timeout=CONNECT_TIMEOUT,
            socket_keepalive=True,
            client_name=f"credentials-{self.pid}",
            # Reconnecting is this thread's own: redis-py's would hide the gap.
            retry=Retry(NoBackoff(), 0),
        )
        pubsub = client.pubsub()
        try:
            pubsub.subscribe(channel_name(self.url))
            self._last_heard = last_ping = self._clock()
            while not self._stopping.is_set():
                message = pubsub.get_message(timeout=READ_TIMEOUT)
                now = self._clock()
                if message is not None:
                    self._last_heard = now
                    if message["type"] == "subscribe":
                        self._subscribed_at = now
                        self._subscribed = True
                        logger.info("credentials: invalidation subscriber connected")
                    elif message["type"] == "message":
                        _forget()
                if now - self._last_heard > SILENCE_LIMIT:
                    raise RedisError(f"Redis said nothing for {SILENCE_LIMIT} s")
                if now - last_ping >= PING_INTERVAL:
                    pubsub.ping()
                    last_ping = now
        finally:
            self._subscribed_at = None
            pubsub.close()
            client.close()


class _Process:
    """This process's subscriber and publishing client; a forked child makes its own."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.subscriber: Subscriber | None = None
        self.publisher: redis.Redis | None = None
        self.publisher_url = ""


_process = _Process()


def _after_fork() -> None:
    global _process
    _process = _Process()


os.register_at_fork(after_in_child=_after_fork)


def _subscriber(url: str) -> Subscriber:
    current = _process.subscriber
    if current is not None and current.url == url and current.pid == os.getpid():
        return current
    with _process.lock:
        current = _process.subscriber
        if current is None or current.url != url or current.pid != os.getpid():
            # A forked child (one forked outside os.fork, as by uWSGI, ran no
            # at-fork hook), or settings changed (tests).
            if current is not None:
                current.stop()
            current = _process.subscriber = Subscriber(url)
            current.start()
        return current


def listening_since() -> float | None:
    """Since when (time.monotonic) this process has heard every invalidation;
    None without Redis or while its subscriber is not connected. The first
    call starts the subscriber."""
    url: str = settings.LIVE_STREAM_REDIS_URL
    if not url:
        return None
    return _subscriber(url).listening_since()


def _publisher(url: str) -> redis.Redis:
    with _process.lock:
        if _process.publisher is None or _process.publisher_url != url:
            _process.publisher = redis.Redis.from_url(
                url,
                socket_timeout=PUBLISH_TIMEOUT,
                socket_connect_timeout=PUBLISH_TIMEOUT,
                # The one retry replaces a pooled connection Redis closed meanwhile.
                retry=Retry(NoBackoff(), 1),
            )
            _process.publisher_url = url
        return _process.publisher


def _publish() -> None:
    _forget()
    url: str = settings.LIVE_STREAM_REDIS_URL
    if not url:
        return
    try:
        _publisher(url).publish(channel_name(url), "forget")
    except (RedisError, OSError) as exc:
        # The write stands; other processes fall back on the cache's short rule
        # as soon as their subscriber loses Redis too.
        logger.warning("credentials: could not publish an invalidation: %s", exc)


def account_saved(*, created: bool, update_fields: Any = None, **kwargs: Any) -> None:
    """post_save of the account model. Accounts are django.contrib.auth's:
    its admin, its commands and the shell write them, through no service of
    ours, so their changes are heard here. Signing in saves `last_login`
    only, which no answer holds."""
    if created or (update_fields is not None and "is_active" not in update_fields):
        return
    credentials_changed()


def account_deleted(**kwargs: Any) -> None:
    """post_delete of the account model: its tokens and memberships go with it."""
    credentials_changed()


def credentials_changed() -> None:
    """Something a cached credential lookup answers was written: forget this
    process's answers now (for the rest of this transaction) and every
    process's once it commits (nothing if it rolls back)."""
    _forget()
    transaction.on_commit(_publish)
