"""The in-process bus's relay (chat/live/relay.py): on the embedded defaults,
what another process publishes reaches the listeners of the process that
serves the socket. Two buses of one process stand for the two processes."""

import asyncio
from pathlib import Path

import pytest

from chat.live import relay as relay_module
from chat.live.local_bus import LocalBus
from chat.live.relay import SocketRelay
from chat.live.subscriptions import Inbox

CHANNEL = "chat:conversation:conv_1"


async def heard(inbox: Inbox, timeout: float = 5.0) -> str:
    return await asyncio.wait_for(inbox.get(), timeout)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "live-stream.sock"


def test_another_process_publication_reaches_the_listener(path: Path) -> None:
    web, worker = LocalBus(SocketRelay(path)), LocalBus(SocketRelay(path))

    async def scenario() -> list[str]:
        inbox = Inbox(capacity=10, loop=asyncio.get_running_loop())
        await web.join(CHANNEL, inbox)
        worker.publish(CHANNEL, '{"type":"message_created","data":{"id":"msg_1"}}')
        worker.publish("chat:conversation:other", '{"type":"ping","data":{}}')
        worker.publish(CHANNEL, '{"type":"message_created","data":{"id":"msg_2"}}')
        return [await heard(inbox), await heard(inbox)]

    assert asyncio.run(scenario()) == [
        '{"type":"message_created","data":{"id":"msg_1"}}',
        '{"type":"message_created","data":{"id":"msg_2"}}',
    ]


def test_the_serving_process_does_not_hear_itself_twice(path: Path) -> None:
    web = LocalBus(SocketRelay(path))

    async def scenario() -> list[str]:
        inbox = Inbox(capacity=10, loop=asyncio.get_running_loop())
        await web.join(CHANNEL, inbox)
        web.publish(CHANNEL, "one")
        first = await heard(inbox)
        with pytest.raises(TimeoutError):
            await heard(inbox, timeout=0.3)
        return [first]

    assert asyncio.run(scenario()) == ["one"]


def test_with_no_process_serving_a_publication_is_dropped_quietly(path: Path, caplog) -> None:
    LocalBus(SocketRelay(path)).publish(CHANNEL, "nobody listens")
    path.touch()  # a socket file left by a process that ended
    LocalBus(SocketRelay(path)).publish(CHANNEL, "nobody listens")
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")]


def test_a_message_too_large_to_relay_is_logged_not_sent(path: Path, monkeypatch, caplog):
    monkeypatch.setattr(relay_module, "MAX_DATAGRAM", 100)
    web, worker = LocalBus(SocketRelay(path)), LocalBus(SocketRelay(path))

    async def scenario() -> str:
        inbox = Inbox(capacity=10, loop=asyncio.get_running_loop())
        await web.join(CHANNEL, inbox)
        worker.publish(CHANNEL, "x" * 200)
        worker.publish(CHANNEL, "small")
        return await heard(inbox)

    assert asyncio.run(scenario()) == "small"
    assert "too large to relay" in caplog.text


def test_a_web_process_restarted_takes_the_socket_over(path: Path) -> None:
    SocketRelay(path).serve(lambda channel, message: None)  # the process that ended
    web, worker = LocalBus(SocketRelay(path)), LocalBus(SocketRelay(path))

    async def scenario() -> str:
        inbox = Inbox(capacity=10, loop=asyncio.get_running_loop())
        await web.join(CHANNEL, inbox)
        worker.publish(CHANNEL, "after the restart")
        return await heard(inbox)

    assert asyncio.run(scenario()) == "after the restart"


def test_a_process_whose_socket_was_taken_over_binds_again_for_its_next_listener(
    path: Path,
) -> None:
    web, worker = LocalBus(SocketRelay(path)), LocalBus(SocketRelay(path))

    async def scenario() -> str:
        loop = asyncio.get_running_loop()
        await web.join(CHANNEL, Inbox(capacity=10, loop=loop))
        # Another web process started since, and bound the path for itself.
        SocketRelay(path).serve(lambda channel, message: None)
        inbox = Inbox(capacity=10, loop=loop)
        await web.join(CHANNEL, inbox)
        worker.publish(CHANNEL, "heard again")
        return await heard(inbox)

    assert asyncio.run(scenario()) == "heard again"
