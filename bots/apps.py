from django.apps import AppConfig


class BotsConfig(AppConfig):
    name = "bots"
    verbose_name = "Tenancy and bots"

    def ready(self) -> None:
        from bots import schema  # noqa: F401 - registers the OpenAPI auth extension
