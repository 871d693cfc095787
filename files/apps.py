from django.apps import AppConfig


class FilesConfig(AppConfig):
    name = "files"

    def ready(self) -> None:
        # Registers the tasks with Celery in every process, the web's too: the
        # services send index_file by name (files/services/file_status.py), and
        # Celery finds its tasks by itself only in a worker.
        from files import tasks  # noqa: F401
