import os

from celery import Celery
from celery.signals import worker_process_init, worker_process_shutdown, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")

app = Celery("platform_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_process_init.connect
def _start_worker_process(**kwargs: object) -> None:
    # Sent in every prefork child, and once by a solo worker.
    from events.engine.process import start_engine
    from platform_site.worker_connections import persistent_connections

    persistent_connections(**kwargs)
    start_engine()


@worker_process_shutdown.connect  # a prefork child
@worker_shutdown.connect  # the main process (a solo worker's engine runs there)
def _stop_worker_process(**kwargs: object) -> None:
    from events.engine.process import stop_engine

    stop_engine()
