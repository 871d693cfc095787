"""Standard Webhooks signatures: `webhook-id`, `webhook-timestamp` and
`webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`."""

from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache

from standardwebhooks.webhooks import Webhook


def signature_headers(
    *, message_id: str, body: str, secrets: Sequence[str], moment: datetime
) -> dict[str, str]:
    """The three headers, with one signature per secret (the current one first;
    during a rotation the previous one too, space-separated as the format allows)."""
    signatures = " ".join(
        _signer(secret).sign(msg_id=message_id, timestamp=moment, data=body) for secret in secrets
    )
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(moment.timestamp())),
        "webhook-signature": signatures,
    }


@lru_cache(maxsize=4096)
def _signer(secret: str) -> Webhook:
    # Decoding the secret is a third of the cost of a signature; a worker
    # signs for the same few bots thousands of times a second.
    return Webhook(secret)


def signing_secrets(
    current: str, previous: str, previous_expires_at: datetime | None, *, now: datetime
) -> tuple[str, ...]:
    """The secrets a delivery is signed with: the bot's current one, and its
    previous one while the overlap after a rotation lasts."""
    if previous and previous_expires_at is not None and previous_expires_at > now:
        return (current, previous)
    return (current,)
