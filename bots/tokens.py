"""Personal access tokens: `bp_pat_` and random characters, kept only as a hash."""

import hashlib
import hmac
import secrets
from datetime import datetime, timedelta

from django.contrib.auth.models import User as Account
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from bots.audit import PLATFORM, Actor, audit
from bots.credential_invalidation import credentials_changed
from bots.models import AccessToken, AuditAction

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
    *,
    account: Account,
    name: str = "",
    expires_in_days: int | None = None,
    actor: Actor = PLATFORM,
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
    # A token is an account's, not a workspace's: its records have none.
    audit(
        actor,
        action=AuditAction.TOKEN_CREATED,
        target_type="token",
        target_id=token.pk,
        workspace=None,
        changes={
            "account": account.get_username(),
            "name": name,
            "prefix": token.prefix,
            "expiresAt": expires_at.isoformat() if expires_at else None,
        },
    )
    return token, raw


@transaction.atomic
def access_token_revoke(*, token: AccessToken, actor: Actor = PLATFORM) -> AccessToken:
    """Revoke the token; revoking a revoked token changes (and records) nothing."""
    revoked = AccessToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    token.refresh_from_db(fields=["revoked_at"])
    if revoked:
        credentials_changed()
        audit(
            actor,
            action=AuditAction.TOKEN_REVOKED,
            target_type="token",
            target_id=token.pk,
            workspace=None,
            changes={"account": token.account.get_username(), "prefix": token.prefix},
        )
    return token


@transaction.atomic
def access_token_rate_limit_change(
    *, token: AccessToken, rate_limit_per_minute: int | None, actor: Actor = PLATFORM
) -> AccessToken:
    """Set the token's own ceiling (None: the platform's); every process
    applies it from the next request on."""
    before = AccessToken.objects.filter(pk=token.pk).values_list("rate_limit_per_minute").get()[0]
    token.rate_limit_per_minute = rate_limit_per_minute
    token.full_clean(exclude=["account"])
    token.save(update_fields=["rate_limit_per_minute"])
    if before != rate_limit_per_minute:
        credentials_changed()
        audit(
            actor,
            action=AuditAction.TOKEN_RATE_LIMIT_CHANGED,
            target_type="token",
            target_id=token.pk,
            workspace=None,
            changes={"rate_limit_per_minute": {"from": before, "to": rate_limit_per_minute}},
        )
    return token


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
