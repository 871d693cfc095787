"""Housekeeping of the idempotency keys the API keeps (platform_site.api.idempotency)."""

from datetime import datetime

from django.conf import settings
from django.utils import timezone

from bots.models import IdempotencyKey


def idempotency_keys_purge_expired(*, now: datetime | None = None) -> int:
    """Delete expired keys, IDEMPOTENCY_PURGE_BATCH per statement, so a large
    purge never holds one long transaction; answers how many."""
    now = now or timezone.now()
    size = settings.IDEMPOTENCY_PURGE_BATCH
    expired = IdempotencyKey.objects.filter(expires_at__lte=now)
    deleted = 0
    while True:
        ids = list(expired.order_by().values_list("pk", flat=True)[:size])
        if ids:
            # Expired is checked again: a key kept anew meanwhile stays.
            deleted += expired.filter(pk__in=ids).delete()[0]
        if len(ids) < size:
            return deleted
