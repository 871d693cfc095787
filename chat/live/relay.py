"""How the in-process bus of the embedded defaults hears what other processes
on the machine publish (a worker making a scheduled message): the web process
binds a Unix datagram socket under DATA_DIR once it has a listener, and any
other process's publication is sent there as one datagram. With Redis, the
Redis bus does this instead, across machines."""

import logging
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger("chat.live")

# A datagram holds one channel and one message; Linux refuses one much over
# 200 KB. A larger message is not relayed (logged), and lists still show it.
MAX_DATAGRAM = 200_000
_SEPARATOR = b"\n"


class SocketRelay:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.serving = False
        self._lock = threading.Lock()
        self._sender: socket.socket | None = None
        self._receiver: socket.socket | None = None
        self._inode = 0

    def serve(self, deliver: Callable[[str, str], None]) -> None:
        """Bind the socket and hand every datagram to `deliver(channel,
        message)` from a thread of its own; again should another process
        have taken the path over since (a web process started after this
        one): the one with the latest listener hears what is relayed."""
        with self._lock:
            if self._receiver is not None and self._holds_path():
                return
            if self._receiver is not None:
                self._receiver.close()  # its thread ends
                self._receiver = None
            self.serving = True
            try:
                receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                # A socket left by a process that ended is taken over: only
                # one web process serves the embedded defaults.
                self.path.unlink(missing_ok=True)
                receiver.bind(str(self.path))
                self._inode = self.path.stat().st_ino
            except OSError as exc:
                logger.warning("live stream: cannot relay other processes' messages: %s", exc)
                return
            self._receiver = receiver
        threading.Thread(
            target=self._receive, args=(receiver, deliver), name="live-relay", daemon=True
        ).start()

    def _holds_path(self) -> bool:
        try:
            return self.path.stat().st_ino == self._inode
        except OSError:
            return False

    def _receive(self, receiver: socket.socket, deliver: Callable[[str, str], None]) -> None:
        while True:
            try:
                datagram = receiver.recv(MAX_DATAGRAM + 1)
            except OSError:  # closed: another bind took over
                return
            channel, _, message = datagram.partition(_SEPARATOR)
            try:
                deliver(channel.decode(), message.decode())
            except Exception:  # one bad datagram must not end the relay
                logger.exception("live stream: a relayed message could not be delivered")

    def send(self, channel: str, message: str) -> None:
        """Hand the message to the process serving the socket, if one does;
        never raises (a publication's change is committed already)."""
        datagram = channel.encode() + _SEPARATOR + message.encode()
        if len(datagram) > MAX_DATAGRAM:
            logger.warning(
                "live stream: a message of %d bytes to %s is too large to relay",
                len(datagram),
                channel,
            )
            return
        try:
            with self._lock:
                if self._sender is None:
                    self._sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                    self._sender.setblocking(False)
                self._sender.sendto(datagram, os.fspath(self.path))
        except (FileNotFoundError, ConnectionRefusedError):
            pass  # no web process is serving: nobody is listening
        except OSError as exc:
            logger.warning("live stream: could not relay to %s: %s", channel, exc)
