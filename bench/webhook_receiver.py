"""A bot's webhook receiver for the delivery benchmarks: HTTP/1.1 with
keep-alive, one process, asyncio protocols (cheap: it shares the cores with
what it measures). How long it takes to answer is in the path:

    /now              at once
    /fixed/<ms>       after <ms> milliseconds
    /uniform/<a>/<b>  after a uniform draw between <a> and <b> ms
    /never            not at all (the client times out)

Every request is recorded as (webhook-id, arrival time, path, and the
`x-bp-type` header of a request in the official SDK's format, when it has
one); on SIGTERM the records are written to FILE, one per line.

    python bench/webhook_receiver.py PORT FILE [ADDRESS]

ADDRESS is where it listens (127.0.0.1 unless given: bench/many_hosts.py
has it on the address its hosts reach this machine by).
"""

from __future__ import annotations

import asyncio
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


def delay_of(path: str) -> float | None:
    """Seconds to wait before answering a request for `path`; None: never."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    if parts[0] == "fixed":
        return int(parts[1]) / 1000
    if parts[0] == "uniform":
        return random.uniform(int(parts[1]), int(parts[2])) / 1000
    if parts[0] == "never":
        return None
    return 0.0


class Receiver(asyncio.Protocol):
    records: list[tuple[str, float, str, str]] = []

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.buffer = b""
        self.loop = asyncio.get_running_loop()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end]
            lowered = head.lower()
            length = _header(head, lowered, b"\r\ncontent-length:")
            if len(self.buffer) < end + 4 + int(length or 0):
                return
            message_id = _header(head, lowered, b"\r\nwebhook-id:").decode("latin-1")
            sdk_type = ""
            if _header(head, lowered, b"\r\nx-bp-operation:") == b"event_received":
                sdk_type = _header(head, lowered, b"\r\nx-bp-type:").decode("latin-1")
                if not self.buffer.startswith(b'{"event":', end + 4):
                    sdk_type = "(no event body)"
            path = self.buffer[: self.buffer.index(b"\r\n")].split(b" ")[1].decode("latin-1")
            self.buffer = self.buffer[end + 4 + int(length or 0) :]
            self.records.append((message_id, time.time(), path, sdk_type))
            delay = delay_of(path)
            if delay is None:
                continue
            if delay <= 0:
                self.transport.write(RESPONSE)
            else:
                self.loop.call_later(delay, self._answer)

    def _answer(self) -> None:
        if not self.transport.is_closing():
            self.transport.write(RESPONSE)


def _header(head: bytes, lowered: bytes, name: bytes) -> bytes:
    """The value of header `name` (lower-case, with its line break before it)
    in `head` (`lowered` is it in lower case); b"" when absent."""
    start = lowered.find(name)
    if start < 0:
        return b""
    start += len(name)
    stop = head.find(b"\r\n", start)
    return head[start : stop if stop >= 0 else len(head)].strip()


def serve(port: int, out: Path, address: str = "127.0.0.1") -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        stop = loop.create_future()
        loop.add_signal_handler(signal.SIGTERM, stop.set_result, None)
        server = await loop.create_server(Receiver, address, port, backlog=4096)
        await stop
        server.close()

    # uvloop where installed: the receiver stands in for bots on other machines,
    # and should take as little of the cores it shares with what it measures.
    try:
        import uvloop
    except ImportError:
        asyncio.run(run())
    else:
        uvloop.run(run())
    out.write_text(
        "".join(f"{mid} {at} {path} {kind}\n" for mid, at, path, kind in Receiver.records)
    )


if __name__ == "__main__":
    serve(int(sys.argv[1]), Path(sys.argv[2]), *sys.argv[3:4])
