from django.apps import AppConfig


class EventsConfig(AppConfig):
    name = "events"

    def ready(self) -> None:
        from events import checks  # noqa: F401 - registers the system checks
