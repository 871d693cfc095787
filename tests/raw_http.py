"""HTTP spoken byte by byte to a test server (tests/servers.py): requests no
client library would send, and answers read as they come off the socket."""

import json
import socket
from typing import Any

from tests.servers import READ_TIMEOUT, Server


class RawAnswer:
    def __init__(self, raw: bytes) -> None:
        head, _, self.content = raw.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        self.status_code = int(status_line.split()[1])
        self.headers = {
            name.strip().lower(): value.strip()
            for name, value in (line.split(":", 1) for line in lines)
        }
        if self.headers.get("transfer-encoding") == "chunked":
            self.content = self._unchunked(self.content)

    @staticmethod
    def _unchunked(content: bytes) -> bytes:
        body = b""
        while True:
            size_line, _, content = content.partition(b"\r\n")
            size = int(size_line, 16)
            if not size:
                return body
            body, content = body + content[:size], content[size + 2 :]

    def json(self) -> Any:
        return json.loads(self.content)


def read_to_close(client: socket.socket) -> bytes:
    received = b""
    while chunk := client.recv(65536):
        received += chunk
    return received


def send_raw(server: Server, request: bytes) -> RawAnswer:
    """Send bytes as they are; read until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=READ_TIMEOUT) as client:
        client.sendall(request)
        return RawAnswer(read_to_close(client))
