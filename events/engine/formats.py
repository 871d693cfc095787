"""How a claimed event is put on the wire, by its bot's delivery format.

- `standard`: the event itself (presenters.delivery_body), signed in the
  Standard Webhooks format.
- `botpress`: the request the official SDK's bot server reads
  (@botpress/sdk, bot/server/context.ts and index.ts): `x-bot-id`,
  `x-bp-operation: event_received`, `x-bp-type` (what it dispatches on:
  `message_created`, `state_expired`, …), `x-bp-configuration` (base64 of
  the JSON it hands handlers as `ctx.configuration`), `x-bot-user-id`, and
  the body `{"event": …}`. It carries the same signature headers: they cost
  the SDK nothing and let a bot verify them.

Both are built once per claimed event, when it is claimed (RequestParts);
the signature is made as the request goes out (webhook_client.py)."""

import base64
import json
import string
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from bots.models import DeliveryFormat
from events.presenters import delivery_body, sdk_delivery_body

# What a header value may hold as it is: printable ASCII. An event type with
# anything else (a line break, a non-Latin letter) is percent-encoded, so it
# can neither end the header nor break the request's encoding; the SDK
# dispatches on the types it knows, which are plain names.
_PLAIN = frozenset(string.printable) - frozenset("\t\n\r\x0b\x0c")


@dataclass(frozen=True, slots=True)
class EventOnWire:
    """What a claim knows of an event and its bot, enough to send it."""

    event_id: str
    bot_id: str
    type: str
    created_at: str  # formatted as the API shows it
    payload: Any
    conversation_id: str | None
    user_id: str | None
    message_id: str | None
    workflow_id: str | None
    delivery_format: str
    configuration: Any
    bot_user_id: str | None


class RequestParts:
    """Each claimed event's body and format header lines (CRLF-ended,
    Latin-1). What all the requests of a bot share in a claim (its id, user
    and configuration) is encoded once per claim, not once per event."""

    def __init__(self) -> None:
        self._bot_lines: dict[str, bytes] = {}

    def __call__(self, event: EventOnWire) -> tuple[str, bytes]:
        if event.delivery_format != DeliveryFormat.BOTPRESS:
            return delivery_body(
                event_id=event.event_id,
                type=event.type,
                bot_id=event.bot_id,
                created_at=event.created_at,
                payload=event.payload,
                conversation_id=event.conversation_id,
                user_id=event.user_id,
                message_id=event.message_id,
                workflow_id=event.workflow_id,
            ), b""
        body = sdk_delivery_body(
            event_id=event.event_id,
            type=event.type,
            created_at=event.created_at,
            payload=event.payload,
            conversation_id=event.conversation_id,
            user_id=event.user_id,
            message_id=event.message_id,
        )
        shared = self._bot_lines.get(event.bot_id)
        if shared is None:
            shared = self._bot_lines[event.bot_id] = _bot_lines(event)
        return body, shared + f"x-bp-type: {header_value(event.type)}\r\n".encode("latin-1")


def _bot_lines(event: EventOnWire) -> bytes:
    lines = [
        f"x-bot-id: {event.bot_id}",
        "x-bp-operation: event_received",
        f"x-bp-configuration: {configuration_header(event.configuration)}",
    ]
    if event.bot_user_id:
        lines.append(f"x-bot-user-id: {event.bot_user_id}")
    return ("\r\n".join(lines) + "\r\n").encode("latin-1")


def configuration_header(configuration: Any) -> str:
    """`x-bp-configuration`: base64 of the configuration's JSON (`{}` when unset)."""
    encoded = json.dumps(configuration or {}, separators=(",", ":"), ensure_ascii=False)
    return base64.b64encode(encoded.encode()).decode("ascii")


def header_value(text: str) -> str:
    if all(char in _PLAIN for char in text):
        return text
    return quote(text, safe="".join(_PLAIN - {"%"}))
