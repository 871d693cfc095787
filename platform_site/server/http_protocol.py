"""uvicorn's HTTP protocol (httptools), with what it leaves to a proxy in
front done here, so that the service is safe without one; platform_site/serve.py
selects it (`--http platform_site.server.http_protocol:HttpToolsProtocol`).

- A request uvicorn refuses itself, before the application sees it, gets the
  contract's error body where uvicorn answers `text/plain`: a request line,
  header or Content-Length that does not parse (raw bytes in the target,
  `Content-Length: abc`, two Content-Lengths, …), an HTTP/1.1 request
  without Host.
- The head of a request is bounded: its bytes (431), its header lines (431),
  its target (414). The bytes are counted before the parser sees them: it
  gathers a header's value whole before it hands it on, so a 20 MB header
  would otherwise be held (and copied as it grows) first.
- Time is bounded: the head must arrive within HTTP_HEADERS_TIMEOUT of its
  first byte, and a body must keep coming (HTTP_BODY_TIMEOUT,
  HTTP_BODY_MIN_RATE), else 408; a connection idle before its first request
  is closed like one idle between two (uvicorn only times the latter).
  A request that comes whole in one read (nearly all) arms no timer.
- A target in absolute form (`GET http://host/path`) names the host the
  request is for (RFC 9112 §3.2.2): it replaces the Host header, so that
  ALLOWED_HOSTS judges it.

The limits are settings (platform_site/settings.py, docs/operating/serving.md)."""

import asyncio
import json
import time
from typing import Any

import httptools
from django.conf import settings
from uvicorn.protocols.http import httptools_impl

from platform_site.api import errors
from platform_site.api.exception_handler import error_body, log_client_error

MALFORMED = "The HTTP request is malformed: its request line, a header or Content-Length"

# Where a connection stands: between requests, reading a head, reading a body.
_IDLE, _HEAD, _BODY = 0, 1, 2


class _Refused(Exception):
    """Raised in a parser callback to refuse the request with `error`."""

    def __init__(self, error: errors.APIError) -> None:
        super().__init__(error.message)
        self.error = error


class HttpToolsProtocol(httptools_impl.HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timeout_keep_alive = settings.HTTP_KEEP_ALIVE_TIMEOUT
        self._max_head = settings.HTTP_MAX_HEADER_BYTES
        self._max_headers = settings.HTTP_MAX_HEADERS
        self._max_target = settings.HTTP_MAX_REQUEST_LINE
        self._phase = _IDLE
        # Bytes of the current head that reached the parser.
        self._head_bytes = 0
        self._head_started = 0.0
        self._has_host = False
        self._body_started = 0.0
        self._body_received = 0
        self._body_last = 0.0
        self._timer: asyncio.TimerHandle | None = None

    # A connection idle before its first request: closed as between two.
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        if self._phase == _IDLE:
            self._head_started = time.monotonic()
            self._head_bytes = 0
            self._phase = _HEAD
        try:
            if self._phase == _HEAD and self._head_bytes + len(data) > self._max_head:
                # Up to the limit only: what comes past it must be the rest
                # of a request (its body, the next one), not of this head.
                allowed = self._max_head - self._head_bytes
                self._feed(data[:allowed])
                if self._phase == _HEAD:
                    raise _Refused(self._head_too_large())
                self._feed(data[allowed:])
            else:
                self._feed(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        except httptools.HttpParserError as exc:
            refused = exc.__context__
            if isinstance(refused, _Refused):
                self._refuse(refused.error)
            else:
                self._refuse(errors.InvalidPayload(MALFORMED))
            return
        except _Refused as refused:
            self._refuse(refused.error)
            return
        if self._phase == _BODY:
            self._body_received_now(data)
        if self._phase != _IDLE and self._timer is None:
            self._arm()

    def _feed(self, data: bytes) -> None:
        if self._phase == _HEAD:
            self._head_bytes += len(data)
        self.parser.feed_data(data)

    def _target_too_long(self) -> errors.APIError:
        return errors.UriTooLong(
            f"The request target is over the limit of {self._max_target} bytes"
        )

    def _head_too_large(self) -> errors.APIError:
        if len(self.url) > self._max_target or not self.headers:
            return self._target_too_long()
        return errors.HeadersTooLarge(
            f"The request headers are over the limit of {self._max_head} bytes"
        )

    # Parser callbacks
    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._phase != _HEAD:
            # The next request of a pipeline, begun in the read that ended
            # the previous one.
            self._phase = _HEAD
            self._head_started = time.monotonic()
            self._head_bytes = 0
        self._has_host = False

    def on_url(self, url: bytes) -> None:
        self.url += url
        if len(self.url) > self._max_target:
            raise _Refused(self._target_too_long())

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value)
        if len(self.headers) > self._max_headers:
            raise _Refused(
                errors.HeadersTooLarge(
                    f"The request has more than {self._max_headers} header lines"
                )
            )
        if self.headers[-1][0] == b"host":
            self._has_host = True

    def on_headers_complete(self) -> None:
        self._phase = _BODY
        self._body_started = self._body_last = time.monotonic()
        self._body_received = 0
        self._disarm()
        if self.url[:1] != b"/" and self.url[:1] != b"*":
            self._take_host_from_target()
        elif not self._has_host and self.parser.get_http_version() == "1.1":
            raise _Refused(errors.InvalidPayload("An HTTP/1.1 request needs a Host header"))
        super().on_headers_complete()

    def _take_host_from_target(self) -> None:
        try:
            target = httptools.parse_url(self.url)
        except httptools.HttpParserInvalidURLError:
            raise _Refused(errors.InvalidPayload(MALFORMED)) from None
        if target.host is None:
            # CONNECT's authority form: not a request this server serves.
            raise _Refused(errors.InvalidPayload(MALFORMED))
        host = target.host if target.port is None else b"%s:%d" % (target.host, target.port)
        self.headers[:] = [(name, value) for name, value in self.headers if name != b"host"]
        self.headers.append((b"host", host))

    def on_message_complete(self) -> None:
        self._phase = _IDLE
        self._disarm()
        super().on_message_complete()

    # Timers: one at a time, armed only when a read leaves a request
    # unfinished; it checks the deadline when it fires and comes back later
    # if the deadline moved (so a read costs no timer of its own).
    def _body_received_now(self, data: bytes) -> None:
        self._body_received += len(data)
        self._body_last = time.monotonic()

    def _deadline(self) -> float:
        if self._phase == _HEAD:
            return self._head_started + settings.HTTP_HEADERS_TIMEOUT
        grace = settings.HTTP_BODY_TIMEOUT
        return min(
            self._body_last + grace,
            self._body_started + grace + self._body_received / settings.HTTP_BODY_MIN_RATE,
        )

    def _arm(self) -> None:
        self._timer = self.loop.call_later(
            max(self._deadline() - time.monotonic(), 0.0), self._timed_out
        )

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _timed_out(self) -> None:
        self._timer = None
        if self._phase == _IDLE or self.transport.is_closing():
            return
        if self._phase == _BODY and self.flow.read_paused:
            # The application is behind, not the client: its turn to read.
            self._body_last = time.monotonic()
        if time.monotonic() < self._deadline():
            self._arm()
            return
        if self._phase == _HEAD:
            error = errors.RequestTimeout(
                f"The request headers did not arrive within {settings.HTTP_HEADERS_TIMEOUT:g} s"
            )
        else:
            error = errors.RequestTimeout(
                "The request body stopped arriving (a silence of "
                f"{settings.HTTP_BODY_TIMEOUT:g} s, or under "
                f"{settings.HTTP_BODY_MIN_RATE} bytes a second)"
            )
        cycle = self.cycle
        if cycle is not None and self._phase == _BODY:
            if cycle.response_started:
                self.transport.close()
                return
            # The application waits for the body: it hears a disconnect.
            cycle.disconnected = True
            cycle.message_event.set()
        self._refuse(error)

    def send_400_response(self, msg: str) -> None:
        # uvicorn's own refusal, with the error body in place of `msg` (the
        # same text whatever the fault; llhttp's reason stays in the parser).
        self._refuse(errors.InvalidPayload(MALFORMED))

    def _refuse(self, error: errors.APIError) -> None:
        """The error body, and the connection closed: what follows on it
        can no longer be told apart from this request."""
        self._phase = _IDLE
        self._disarm()
        error_id = errors.new_error_id()
        log_client_error(error_id, error)
        body = json.dumps(error_body(error, error_id), separators=(",", ":")).encode()
        content = [httptools_impl.STATUS_LINE[error.status_code]]
        for name, value in self.server_state.default_headers:
            content += [name, b": ", value, b"\r\n"]
        content += [
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            b"connection: close\r\n",
            b"\r\n",
            body,
        ]
        self.transport.write(b"".join(content))
        self.transport.close()
