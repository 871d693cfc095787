"""Celery tasks of the bots app: housekeeping run by beat."""

import logging

from celery import shared_task

from bots.services.idempotency_keys import idempotency_keys_purge_expired

logger = logging.getLogger(__name__)


@shared_task(name="bots.tasks.purge_expired_idempotency_keys", ignore_result=True)
def purge_expired_idempotency_keys() -> int:
    deleted = idempotency_keys_purge_expired()
    logger.info("Deleted %d expired idempotency keys", deleted)
    return deleted
