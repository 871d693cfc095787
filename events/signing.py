"""Standard Webhooks signatures: `webhook-id`, `webhook-timestamp` and
`webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`."""

from collections.abc import Sequence
from datetime import datetime

from standardwebhooks.webhooks import Webhook

from bots.models import Bot


def signature_headers(
    *, message_id: str, body: str, secrets: Sequence[str], moment: datetime
) -> dict[str, str]:
    """The three headers, with one signature per secret (the current one first;
    during a rotation the previous one too, space-separated as the format allows)."""
    signatures = " ".join(
        Webhook(secret).sign(msg_id=message_id, timestamp=moment, data=body) for secret in secrets
    )
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(moment.timestamp())),
        "webhook-signature": signatures,
    }


def bot_signing_secrets(bot: Bot, *, now: datetime) -> list[str]:
    """The secrets a delivery is signed with: the bot's current one, and its
    previous one while the overlap after a rotation lasts."""
    secrets = [bot.signing_secret]
    expires = bot.previous_signing_secret_expires_at
    if bot.previous_signing_secret and expires is not None and expires > now:
        secrets.append(bot.previous_signing_secret)
    return secrets
