"""Celery tasks of files. They take ids and call services; the database says
what is pending, so each may run twice or on many workers at once."""

import logging

from celery import shared_task
from django.conf import settings
from kombu.exceptions import OperationalError

from files.services.embeddings import EMBED_FILE_TASK, file_embed, files_requeue_embeddings
from files.services.file_index import file_index, files_requeue_stalled
from files.services.file_status import INDEX_FILE_TASK
from files.services.files import files_delete_expired

logger = logging.getLogger(__name__)


@shared_task(
    name=INDEX_FILE_TASK,
    ignore_result=True,
    soft_time_limit=settings.FILE_INDEXING_TIME_LIMIT,
    time_limit=settings.FILE_INDEXING_TIME_LIMIT + 30,
)
def index_file(file_id: str, revision: int) -> str:
    return file_index(file_id=file_id, revision=revision).value


@shared_task(name="files.tasks.requeue_stalled_indexing", ignore_result=True)
def requeue_stalled_indexing() -> int:
    requeued = files_requeue_stalled()
    for file_id, revision in requeued:
        try:
            index_file.delay(file_id, revision)
        except OperationalError:
            logger.warning("The broker refused indexing; retried at the next pass", exc_info=True)
            break
    return len(requeued)


@shared_task(
    name=EMBED_FILE_TASK,
    ignore_result=True,
    soft_time_limit=settings.FILE_INDEXING_TIME_LIMIT,
    time_limit=settings.FILE_INDEXING_TIME_LIMIT + 30,
)
def embed_file(file_id: str) -> bool:
    return file_embed(file_id=file_id)


@shared_task(name="files.tasks.embed_due_files", ignore_result=True)
def embed_due_files() -> int:
    """Queue the files due for vectors whose run was lost or never queued
    (`manage.py embed_files --queue`); nothing while semantic search is
    turned off. The model is not loaded here: only a run that embeds does."""
    if not settings.FILE_SEARCH_SEMANTIC:
        return 0
    due = files_requeue_embeddings()
    for file_id in due:
        try:
            embed_file.delay(file_id)
        except OperationalError:
            logger.warning("The broker refused embedding; retried at the next pass", exc_info=True)
            break
    return len(due)


@shared_task(name="files.tasks.delete_expired_files", ignore_result=True)
def delete_expired_files() -> int:
    return files_delete_expired()
