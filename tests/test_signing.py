"""Signatures made by events.engine.signing verify with the Standard Webhooks library,
for every secret a bot may have, and with no other."""

import base64
import json
from datetime import UTC, datetime

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from bots.models.bot import new_signing_secret
from events.engine.signing import signatures


def headers(message_id: str, moment: datetime, signature: str) -> dict[str, str]:
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(moment.timestamp())),
        "webhook-signature": signature,
    }


def test_each_secret_verifies_its_signature_and_the_library_agrees():
    current, previous = new_signing_secret(), new_signing_secret()
    body = json.dumps({"text": "héllo ✓"}, ensure_ascii=False).encode()
    moment = datetime.now(UTC)
    signed = signatures(
        message_id="evt_1",
        timestamp=int(moment.timestamp()),
        body=body,
        secrets=[current, previous],
    )
    first, second = signed.split(" ")
    assert first == Webhook(current).sign("evt_1", moment, body.decode())
    assert second == Webhook(previous).sign("evt_1", moment, body.decode())
    for secret in (current, previous):
        assert Webhook(secret).verify(body, headers("evt_1", moment, signed)) == {"text": "héllo ✓"}
    with pytest.raises(WebhookVerificationError):
        Webhook(new_signing_secret()).verify(body, headers("evt_1", moment, signed))
    with pytest.raises(WebhookVerificationError):
        Webhook(current).verify(body + b" ", headers("evt_1", moment, signed))
    with pytest.raises(WebhookVerificationError):
        Webhook(current).verify(body, headers("evt_2", moment, signed))


def test_a_secret_without_padding_reads_as_the_libraries_read_it():
    raw = b"k" * 31  # base64 with one padding character
    padded = "whsec_" + base64.b64encode(raw).decode()
    unpadded = padded.rstrip("=")
    moment = datetime.now(UTC)
    for secret in (padded, unpadded):
        signed = signatures(
            message_id="evt_1", timestamp=int(moment.timestamp()), body=b"{}", secrets=[secret]
        )
        Webhook(padded).verify(b"{}", headers("evt_1", moment, signed))
