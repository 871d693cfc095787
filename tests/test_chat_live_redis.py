"""The Redis bus of the live stream, against the Redis that settings name
(LIVE_STREAM_REDIS_URL): skipped on the embedded defaults, which have none."""

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from django.conf import settings as django_settings

from chat.live import redis_bus
from chat.live.redis_bus import RedisBus
from chat.live.subscriptions import ListenerDropped
from tests.test_chat_live import ServerLoop

REDIS_URL: str = django_settings.LIVE_STREAM_REDIS_URL
TIMEOUT = 5.0

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not REDIS_URL,
        reason="no Redis configured: LIVE_STREAM_REDIS_URL is empty (the embedded "
        "defaults use the in-process bus)",
    ),
]


@pytest.fixture
def server() -> Iterator[ServerLoop]:
    running = ServerLoop()
    yield running
    running.close()


@pytest.fixture
def bus(monkeypatch: pytest.MonkeyPatch) -> RedisBus:
    """A bus of its own (not the process's), quick to reconnect."""
    monkeypatch.setattr(redis_bus, "RECONNECT_MIN_DELAY", 0.05)
    return RedisBus(REDIS_URL)


@pytest.fixture
def raw() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    yield client
    client.close()


def channel_name(test: str) -> str:
    # Unique per run: other runs may share this Redis.
    return f"chat:conversation:test-{test}-{os.getpid()}-{time.monotonic_ns()}"


def redis_subscribers(raw: redis.Redis, channel: str) -> int:
    """Connections subscribed to the channel as the bus names it in Redis."""
    database = raw.connection_pool.connection_kwargs.get("db", 0)
    [(_, count)] = raw.pubsub_numsub(f"db{database}:{channel}")
    return int(count)


def wait_for(condition: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + TIMEOUT
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not met within {TIMEOUT} s: {what}")
        time.sleep(0.02)
    return result


def test_what_another_thread_publishes_reaches_the_listener(server, bus):
    channel = channel_name("reach")
    subscription = server.run(bus.subscribe(channel).open())
    bus.publish(channel, '{"type":"ping","data":{}}')
    assert server.run(subscription.get()) == '{"type":"ping","data":{}}'
    subscription.close()


def test_a_process_holds_one_redis_subscription_per_channel(server, bus, raw):
    channel = channel_name("one")
    first = server.run(bus.subscribe(channel).open())
    second = server.run(bus.subscribe(channel).open())
    assert redis_subscribers(raw, channel) == 1
    assert bus.listener_count(channel) == 2
    bus.publish(channel, "both")
    assert server.run(first.get()) == "both"
    assert server.run(second.get()) == "both"
    first.close()
    time.sleep(0.1)
    assert redis_subscribers(raw, channel) == 1
    second.close()
    wait_for(lambda: redis_subscribers(raw, channel) == 0, "unsubscribed after the last left")
    # A new listener subscribes again.
    third = server.run(bus.subscribe(channel).open())
    assert redis_subscribers(raw, channel) == 1
    third.close()


def test_channels_carry_the_database_number(server, bus, raw):
    channel = channel_name("database")
    database = raw.connection_pool.connection_kwargs.get("db", 0)
    other = RedisBus(REDIS_URL.rsplit("/", 1)[0] + f"/{(database + 1) % 16}")
    here = server.run(bus.subscribe(channel).open())
    there = server.run(other.subscribe(channel).open())
    other.publish(channel, "not for here")
    bus.publish(channel, "for here")
    assert server.run(here.get()) == "for here"
    assert server.run(there.get()) == "not for here"
    here.close()
    there.close()


def test_listeners_stay_and_hear_again_once_the_connection_is_back(server, bus, raw, caplog):
    channel = channel_name("reconnect")
    subscription = server.run(bus.subscribe(channel).open())
    name = f"live-stream-{os.getpid()}"
    ours = [client for client in raw.client_list() if client["name"] == name]
    assert ours, raw.client_list()
    with caplog.at_level(logging.INFO, logger="chat.live"):
        for client in ours:
            raw.client_kill_filter(_id=client["id"])
        wait_for(lambda: "lost Redis" in caplog.text, "the loss logged")
        wait_for(lambda: redis_subscribers(raw, channel) == 1, "subscribed again")
        wait_for(lambda: "connected to Redis again" in caplog.text, "the return logged")
    bus.publish(channel, json.dumps({"type": "event_created", "data": {}}))
    assert json.loads(server.run(subscription.get())) == {"type": "event_created", "data": {}}
    subscription.close()


def test_without_redis_listeners_are_answered_and_publishing_does_not_raise(server, caplog):
    unreachable = RedisBus("redis://127.0.0.1:1/0")  # nothing listens on port 1
    channel = channel_name("unreachable")
    started = time.monotonic()
    subscription = server.run(unreachable.subscribe(channel).open())
    second = server.run(unreachable.subscribe(channel).open())
    assert time.monotonic() - started < redis_bus.SUBSCRIBE_TIMEOUT
    with caplog.at_level(logging.WARNING, logger="chat.live"):
        unreachable.publish(channel, "lost")
    assert "could not publish" in caplog.text
    subscription.close()
    second.close()


def test_a_listener_that_falls_behind_is_dropped_from_the_redis_fan_out(server, bus, settings):
    settings.LIVE_STREAM_QUEUE_SIZE = 2
    channel = channel_name("behind")
    slow = server.run(bus.subscribe(channel).open())
    keeping_up = server.run(bus.subscribe(channel).open())
    for n in range(5):
        bus.publish(channel, str(n))
        assert server.run(keeping_up.get()) == str(n)
    wait_for(lambda: bus.listener_count(channel) == 1, "the slow one dropped")
    with pytest.raises(ListenerDropped):
        server.run(slow.get())
    slow.close()
    keeping_up.close()


def test_many_channels_at_once(server, bus, raw):
    channels = [channel_name(f"many{n}") for n in range(50)]

    async def subscribe_all() -> list[Any]:
        return await asyncio.gather(*(bus.subscribe(channel).open() for channel in channels))

    subscriptions = server.run(subscribe_all())
    for channel in channels:
        bus.publish(channel, channel)
    assert [server.run(s.get()) for s in subscriptions] == channels
    for subscription in subscriptions:
        subscription.close()
    wait_for(lambda: redis_subscribers(raw, channels[-1]) == 0, "all unsubscribed")
