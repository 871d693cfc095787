"""A small stand-alone bot: it receives its webhook deliveries, verifies their
Standard Webhooks signature, and answers every text message a user sends with
`POST /v1/chat/messages`.

    .venv/bin/python examples/echo_bot.py --demo var/demo.json
    .venv/bin/python examples/echo_bot.py --api-url http://127.0.0.1:8000 \\
        --token bp_pat_... --bot-id bot_... --secret whsec_...

The bot's webhook URL must point at this server (`make run` points the demo
bot at http://127.0.0.1:8100/, the default --port). Only the standard library
and `standardwebhooks` are used, so the file can be copied out of the project.
"""

from __future__ import annotations

import argparse
import http.client
import json
import logging
import threading
import urllib.parse
from collections import OrderedDict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

log = logging.getLogger("echo_bot")

# Deliveries are retried until answered with a 2xx: the same event (same
# webhook-id) can arrive twice, so the last ids handled are remembered.
SEEN_EVENTS = 10_000
MAX_BODY = 1024 * 1024


class ReplyFailed(Exception):
    pass


class EchoBot:
    def __init__(self, *, api_url: str, token: str, bot_id: str, secret: str) -> None:
        self.api_url = api_url.rstrip("/")
        self.token = token
        self.bot_id = bot_id
        self.webhook = Webhook(secret)
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        parsed = urllib.parse.urlsplit(self.api_url)
        self._scheme, self._netloc, self._path = parsed.scheme, parsed.netloc, parsed.path
        # One keep-alive connection to the platform per delivery thread: a
        # reply does not pay for a new connection (nor the platform for
        # accepting it).
        self._local = threading.local()

    def _connection(self, *, fresh: bool) -> http.client.HTTPConnection:
        connection: http.client.HTTPConnection | None = getattr(self._local, "connection", None)
        if connection is None or fresh:
            if connection is not None:
                connection.close()
            kind = (
                http.client.HTTPSConnection
                if self._scheme == "https"
                else http.client.HTTPConnection
            )
            connection = kind(self._netloc, timeout=10)
            self._local.connection = connection
        return connection

    def receive(self, headers: dict[str, str], body: bytes) -> int:
        """Handle one delivery; the HTTP status to answer with."""
        try:
            event = self.webhook.verify(body, headers)
        except WebhookVerificationError as exc:
            log.warning("refused a delivery with a bad signature: %s", exc)
            return 401
        event_id = str(event.get("id"))
        with self._lock:
            if event_id in self._seen:
                return 200
        if event.get("type") == "message_created":
            try:
                self.answer(event)
            except ReplyFailed as exc:
                log.warning("could not reply to %s, the platform will retry: %s", event_id, exc)
                return 503
        with self._lock:
            self._seen[event_id] = None
            while len(self._seen) > SEEN_EVENTS:
                self._seen.popitem(last=False)
        return 200

    def answer(self, event: dict[str, Any]) -> None:
        message = event.get("payload", {}).get("message", {})
        payload = message.get("payload", {})
        # The bot's own replies are messages too: never answer those.
        if message.get("direction") != "incoming" or payload.get("type") != "text":
            return
        self.reply(
            conversation_id=message["conversationId"],
            text=f"You said: {payload['text']}",
            key=f"echo-{event.get('id')}",
        )

    def reply(self, *, conversation_id: str, text: str, key: str) -> dict[str, Any]:
        """Post the reply. `key` (Idempotency-Key) makes a repeat of it (a
        delivery retried after a lost answer, a request sent again on a
        fresh connection) answer the first reply instead of a second one."""
        body = {
            "payload": {"type": "text", "text": text},
            "conversationId": conversation_id,
            # The bot writes as itself: its replies stream with isBot true.
            "userId": self.bot_id,
            "type": "text",
            "tags": {},
        }
        headers = {
            "Authorization": f"Bearer {self.token}",
            "x-bot-id": self.bot_id,
            "Content-Type": "application/json",
            "Idempotency-Key": key,
        }
        encoded = json.dumps(body).encode()
        # Once more on a fresh connection when a kept one was closed by the
        # platform meanwhile (its idle timeout, a restart); the key makes
        # sending it again safe whatever became of the first.
        for kept in (True, False):
            connection = self._connection(fresh=not kept)
            try:
                connection.request("POST", f"{self._path}/v1/chat/messages", encoded, headers)
                response = connection.getresponse()
                content = response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                connection.close()
                if kept:
                    continue
                raise ReplyFailed("the platform closed the connection") from None
            except (OSError, http.client.HTTPException) as exc:
                connection.close()
                raise ReplyFailed(str(exc)) from None
            break
        if response.status >= 300:
            raise ReplyFailed(f"{response.status} {content[:500]!r}")
        answer: dict[str, Any] = json.loads(content)
        log.info("replied in %s: %s", conversation_id, text)
        return answer


def server(bot: EchoBot, host: str, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 <= length <= MAX_BODY:
                self.answer(413)
                return
            body = self.rfile.read(length)
            self.answer(bot.receive(dict(self.headers.items()), body))

        def answer(self, status: int) -> None:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            log.debug(format, *args)

    return ThreadingHTTPServer((host, port), Handler)


def main() -> None:
    parser = argparse.ArgumentParser(description="An echo bot for the bot platform API")
    parser.add_argument("--demo", help="a `seed_demo --json` file to take the settings from")
    parser.add_argument("--api-url", help="the platform's base URL")
    parser.add_argument("--token", help="a personal access token (bp_pat_...)")
    parser.add_argument("--bot-id")
    parser.add_argument("--secret", help="the bot's webhook signing secret (whsec_...)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8100)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    settings: dict[str, str] = {}
    if args.demo:
        with open(args.demo) as demo_file:
            demo = json.load(demo_file)
        settings = {
            "api_url": demo["baseUrl"],
            "token": demo["tokens"]["developer"],
            "bot_id": demo["botId"],
            "secret": demo["webhookSecret"],
        }
    for name, value in (
        ("api_url", args.api_url),
        ("token", args.token),
        ("bot_id", args.bot_id),
        ("secret", args.secret),
    ):
        if value:
            settings[name] = value
    missing = {"api_url", "token", "bot_id", "secret"} - settings.keys()
    if missing:
        parser.error(f"missing settings: {', '.join(sorted(missing))} (or pass --demo)")

    httpd = server(EchoBot(**settings), args.host, args.port)
    log.info("listening on http://%s:%d/ for %s", args.host, args.port, settings["bot_id"])
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()


if __name__ == "__main__":
    main()
