from django.apps import AppConfig
from django.conf import settings
from django.db.models.signals import post_delete, post_save


class BotsConfig(AppConfig):
    name = "bots"
    verbose_name = "Tenancy and bots"

    def ready(self) -> None:
        from platform_site.foundation.credential_invalidation import account_deleted, account_saved

        post_save.connect(account_saved, sender=settings.AUTH_USER_MODEL)
        post_delete.connect(account_deleted, sender=settings.AUTH_USER_MODEL)
