import os

from celery import Celery
from celery.signals import worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")

app = Celery("platform_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_process_init.connect
def _persistent_database_connections(**kwargs: object) -> None:
    from platform_site.worker_connections import persistent_connections

    persistent_connections(**kwargs)
