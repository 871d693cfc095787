"""The form of personal access tokens (`bp_pat_` and random characters, kept
only as a hash) and the check of one presented with a request."""

import hashlib
import hmac
from datetime import datetime, timedelta

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


def token_digest(raw: str) -> str:
    """The stored hash of a raw token, or InvalidToken when it cannot be one."""
    if len(raw) != TOKEN_LENGTH or not raw.startswith(TOKEN_PREFIX):
        raise InvalidToken("The token is malformed")
    return hash_token(raw)


def token_check_usable(*, token: AccessToken | None, digest: str, account_is_active: bool) -> None:
    """InvalidToken unless `token` is the live token of an active account; then
    its use is recorded."""
    # The lookup was by hash; comparing again in constant time keeps a timing
    # difference in the index walk from saying anything about other tokens.
    if token is None or not hmac.compare_digest(token.token_hash, digest):
        raise InvalidToken("The token is unknown")
    now = timezone.now()
    if token.revoked_at is not None:
        raise InvalidToken("The token has been revoked")
    if token.expires_at is not None and token.expires_at <= now:
        raise InvalidToken("The token has expired")
    if not account_is_active:
        raise InvalidToken("The token's account is disabled")
    _record_use(token, now)


def _record_use(token: AccessToken, now: datetime) -> None:
    """At most one write a minute per token, however busy it is."""
    if token.last_used_at is not None and now - token.last_used_at < LAST_USED_RESOLUTION:
        return
    AccessToken.objects.filter(pk=token.pk).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_RESOLUTION)
    ).update(last_used_at=now)
    token.last_used_at = now
