from django.apps import AppConfig


class AdminApiConfig(AppConfig):
    name = "adminapi"
    verbose_name = "Admin API"
