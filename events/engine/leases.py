"""Leases: a claim on an event for one delivery, named by a random number and
ending at `next_attempt_at`, after which any worker may claim it again."""

import secrets
from datetime import timedelta

from django.conf import settings


def new_lease() -> int:
    """A lease id: random, so that claims by different processes never share one."""
    return secrets.randbits(62) + 1


def lease_duration() -> timedelta:
    return timedelta(seconds=settings.EVENT_LEASE_SECONDS)
