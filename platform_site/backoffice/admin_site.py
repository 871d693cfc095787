"""The Django admin under the platform's name, where Django would say
"Django administration". Django's own AdminSite is kept (every model admin
registers on it); its home page shows the dashboard above the app list."""

from django.conf import settings
from django.contrib import admin


def admin_site_configure() -> None:
    """Names the admin for the platform and makes its home page the dashboard."""
    admin.site.site_header = settings.PLATFORM_NAME
    admin.site.site_title = f"{settings.PLATFORM_NAME} admin"
    admin.site.index_title = "Dashboard"
    admin.site.index_template = "admin/platform/index.html"
