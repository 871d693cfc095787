"""Personal access tokens: `bp_pat_` and random characters, kept only as a hash."""

import hashlib
import hmac
import secrets
from datetime import datetime, timedelta

from django.contrib.auth.models import User as Account
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from bots.models import AccessToken

TOKEN_PREFIX = "bp_pat_"
_RANDOM_PART_LENGTH = 43  # secrets.token_urlsafe(32)
TOKEN_LENGTH = len(TOKEN_PREFIX) + _RANDOM_PART_LENGTH
SHOWN_PREFIX_LENGTH = len(TOKEN_PREFIX) + 5
LAST_USED_RESOLUTION = timedelta(minutes=1)


class InvalidToken(Exception):
    pass


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


@transaction.atomic
def access_token_create(
    *, account: Account, name: str = "", expires_in_days: int | None = None
) -> tuple[AccessToken, str]:
    """A new token and its raw value, which is never stored and shown only now."""
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    expires_at = timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None
    token = AccessToken.objects.create(
        account=account,
        name=name,
        prefix=raw[:SHOWN_PREFIX_LENGTH],
        token_hash=hash_token(raw),
        expires_at=expires_at,
    )
    return token, raw


def access_token_revoke(*, token: AccessToken) -> AccessToken:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def access_token_authenticate(*, raw: str) -> AccessToken:
    """The live token that `raw` is, or InvalidToken saying why not."""
    if len(raw) != TOKEN_LENGTH or not raw.startswith(TOKEN_PREFIX):
        raise InvalidToken("The token is malformed")
    digest = hash_token(raw)
    token = AccessToken.objects.select_related("account").filter(token_hash=digest).first()
    # The lookup is by hash; comparing again in constant time keeps a timing
    # difference in the index walk from saying anything about other tokens.
    if token is None or not hmac.compare_digest(token.token_hash, digest):
        raise InvalidToken("The token is unknown")
    now = timezone.now()
    if token.revoked_at is not None:
        raise InvalidToken("The token has been revoked")
    if token.expires_at is not None and token.expires_at <= now:
        raise InvalidToken("The token has expired")
    if not token.account.is_active:
        raise InvalidToken("The token's account is disabled")
    _record_use(token, now)
    return token


def _record_use(token: AccessToken, now: datetime) -> None:
    """At most one write a minute per token, however busy it is."""
    if token.last_used_at is not None and now - token.last_used_at < LAST_USED_RESOLUTION:
        return
    AccessToken.objects.filter(pk=token.pk).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_RESOLUTION)
    ).update(last_used_at=now)
    token.last_used_at = now
