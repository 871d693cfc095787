"""The one way a service (or the delivery engine) starts a background job.

A job is a Celery task in its app's tasks.py, on top of services: services
never import tasks, so they name the task they start. What a transaction
decides is only sent once it commits, so that a worker never reads a row
before it is there, and a rolled-back change starts nothing."""

from typing import Any

from celery import current_app
from django.db import transaction


def job_send(name: str, *args: Any, after_commit: bool = True, **options: Any) -> None:
    """Send the task `name` with `args` (and Celery's `apply_async` options),
    once the current transaction commits (at once outside one, or when
    `after_commit` is False)."""

    def send() -> None:
        current_app.send_task(name, args=args, **options)

    if after_commit:
        transaction.on_commit(send)
    else:
        send()
