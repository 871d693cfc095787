"""A local HTTP server standing in for a bot's webhook receiver: it records
every request and answers from a script (200 by default)."""

import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.time() when the request was read
    client_port: int = 0  # tells the connections apart

    def json(self) -> Any:
        import json

        return json.loads(self.body)


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: bytes = b"ok"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering


class _Server(ThreadingHTTPServer):
    # Deliveries arrive a hundred at once; with http.server's backlog of 5 the
    # kernel would drop connections and the clients retry them seconds later.
    request_queue_size = 256


class Receiver:
    def __init__(self) -> None:
        self.requests: list[Received] = []
        self._script: deque[Answer] = deque()
        self._routes: dict[str, Answer] = {}
        # Requests being answered now, and the most there were at once, by path.
        self.in_flight: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self._lock = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                answer = receiver._record(
                    Received(
                        self.path,
                        dict(self.headers.items()),
                        body,
                        time.time(),
                        self.client_address[1],
                    )
                )
                try:
                    if answer.delay:
                        time.sleep(answer.delay)
                finally:
                    receiver._answered(self.path)
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        # A client that gave up (a delivery timeout) resets the connection;
        # that is the test working, not a failure worth a trace.
        self.server.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/webhook"

    def _record(self, received: Received) -> Answer:
        with self._lock:
            self.requests.append(received)
            self.in_flight[received.path] += 1
            self.peak[received.path] = max(self.peak[received.path], self.in_flight[received.path])
            if self._script:
                answer = self._script.popleft()
            else:
                answer = self._routes.get(received.path, Answer())
            self._lock.notify_all()
            return answer

    def _answered(self, path: str) -> None:
        with self._lock:
            self.in_flight[path] -= 1

    def url_for(self, path: str, answer: Answer | None = None) -> str:
        """A URL of this receiver on `path`, answered with `answer` (200 by
        default) once the script of `answer()` is spent."""
        if answer is not None:
            with self._lock:
                self._routes[path] = answer
        return self.url.rsplit("/", 1)[0] + path

    def answer(self, *answers: Answer) -> None:
        """Answer the next requests with these, in order; then 200 again."""
        with self._lock:
            self._script.extend(answers)

    def wait_for(self, count: int, timeout: float = 20.0) -> list[Received]:
        """The first `count` requests, waiting for them up to `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self.requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"expected {count} requests, got {len(self.requests)} in {timeout} s"
                    )
                self._lock.wait(left)
            return list(self.requests[:count])

    def for_event(self, event_id: str) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if r.headers.get("webhook-id") == event_id]


@contextmanager
def running_receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    # Polled for shutdown every 20 ms rather than http.server's 0.5 s, which
    # would add up over a test run.
    thread = threading.Thread(
        target=receiver.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
