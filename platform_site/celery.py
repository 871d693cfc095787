import logging
import os
from typing import Any

import celery.apps.worker
from celery import Celery, Task
from celery.signals import (
    before_task_publish,
    setup_logging,
    task_postrun,
    task_prerun,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)
from structlog.contextvars import bind_contextvars, get_contextvars, reset_contextvars

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")

app = Celery("platform_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_process_init.connect
def _start_worker_process(**kwargs: object) -> None:
    # Sent in every prefork child, and once by a solo worker.
    from events.engine.process import start_engine
    from platform_site.server.worker_connections import persistent_connections

    persistent_connections(**kwargs)
    start_engine()


@worker_process_shutdown.connect  # a prefork child
@worker_shutdown.connect  # the main process (a solo worker's engine runs there)
def _stop_worker_process(**kwargs: object) -> None:
    from events.engine.process import stop_engine

    stop_engine()
    # A prefork child ends with os._exit, past logging's own flush at exit:
    # the lines its handlers hold back (platform_site/observability/log_handler.py) go now.
    for handler in logging.getLogger().handlers:
        handler.flush()


@setup_logging.connect
def _logging_as_configured(**kwargs: object) -> None:
    # Answered, Celery leaves logging alone: every line (its pool's too,
    # which it would give a handler and format of its own) goes through
    # LOGGING's one formatter, at LOG_LEVEL.
    from django.conf import settings

    from platform_site.observability.log_config import configure

    configure(settings.LOGGING)


# The request id travels with the tasks a request enqueues (a message header),
# and every line a task logs carries it, with the task's name and id.
REQUEST_ID_HEADER = "request_id"


@before_task_publish.connect
def _send_request_id(headers: dict[str, Any], **kwargs: object) -> None:
    request_id = get_contextvars().get("request_id")
    if request_id is not None:
        headers[REQUEST_ID_HEADER] = request_id


# What each running task bound, to be undone when it ends: a task run in
# the caller's thread (eagerly) gives the caller its own context back.
_bound: dict[str, Any] = {}


@task_prerun.connect
def _bind_task_context(task_id: str, task: Task, **kwargs: object) -> None:
    context = {"task": task.name, "task_id": task_id}
    request_id = getattr(task.request, REQUEST_ID_HEADER, None)
    if request_id is not None:
        context["request_id"] = request_id
    _bound[task_id] = bind_contextvars(**context)


@task_postrun.connect
def _unbind_task_context(task_id: str, **kwargs: object) -> None:
    bound = _bound.pop(task_id, None)
    if bound is not None:
        reset_contextvars(**bound)


_worker_notices = logging.getLogger("celery.apps.worker")


def _say(msg: str, f: object = None) -> None:
    # What Celery's signal handlers announce (a warm shutdown, a restart) it
    # writes raw to the terminal: as a log record it takes the log's format,
    # one JSON object per line with LOG_FORMAT=json. (Signal handlers run
    # between bytecodes of the main thread, and logging's locks are
    # re-entrant.)
    _worker_notices.info(msg.strip())


setattr(celery.apps.worker, "safe_say", _say)  # noqa: B010 - no typed way to replace it


@worker_ready.connect
def _serve_host_metrics(**kwargs: object) -> None:
    """On a host with no web process to serve them, the main process of a
    worker serves the host's metrics (WORKER_METRICS_PORT). Once the pool's
    children are forked, so that they do not hold its socket."""
    from django.conf import settings

    from platform_site.observability.metrics_files import host_metrics_serve

    if settings.METRICS_ENABLED and settings.WORKER_METRICS_PORT:
        host_metrics_serve(port=settings.WORKER_METRICS_PORT, host=settings.WORKER_METRICS_HOST)
