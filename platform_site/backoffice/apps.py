from django.apps import AppConfig


class BackofficeConfig(AppConfig):
    """The Django admin as staff see it: the site, its dashboard and their pages."""

    name = "platform_site.backoffice"
    label = "backoffice"
    verbose_name = "Back office"

    def ready(self) -> None:
        from platform_site.backoffice.admin_site import admin_site_configure

        admin_site_configure()
