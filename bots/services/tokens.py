"""Personal access tokens: made (the raw value shown once), revoked, given
their own rate limit. Each change leaves an audit record."""

import secrets
from datetime import timedelta

from django.contrib.auth.models import User as Account
from django.db import transaction
from django.utils import timezone

from bots.actors import PLATFORM, Actor
from bots.models import AccessToken, AuditAction
from bots.services.audit_records import audit_record_add
from bots.token_checks import SHOWN_PREFIX_LENGTH, TOKEN_PREFIX, hash_token
from platform_site.foundation.credential_invalidation import credentials_changed


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
    audit_record_add(
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
        audit_record_add(
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
        audit_record_add(
            actor,
            action=AuditAction.TOKEN_RATE_LIMIT_CHANGED,
            target_type="token",
            target_id=token.pk,
            workspace=None,
            changes={"rate_limit_per_minute": {"from": before, "to": rate_limit_per_minute}},
        )
    return token
