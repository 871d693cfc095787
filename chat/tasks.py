"""Celery tasks of the chat app: housekeeping run by beat."""

import logging

from celery import shared_task

from chat.services.user_purge import chat_users_purge_stale

logger = logging.getLogger(__name__)


@shared_task(name="chat.tasks.purge_stale_chat_users", ignore_result=True)
def purge_stale_chat_users() -> int:
    deleted = chat_users_purge_stale()
    logger.info("Deleted %d stale anonymous chat users", deleted)
    return deleted
