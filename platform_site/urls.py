from django.contrib import admin
from django.urls import include, path
from drf_spectacular.renderers import OpenApiJsonRenderer
from drf_spectacular.views import SpectacularAPIView

from platform_site.api.docs import DocsView
from platform_site.api.health import HealthViewSet
from platform_site.api.metrics_endpoint import metrics_view
from platform_site.backoffice.home import favicon, home

urlpatterns = [
    path("", home, name="home"),
    path("favicon.ico", favicon),
    path("admin/", admin.site.urls),
    path("healthz", HealthViewSet.as_view({"get": "live"}), name="healthz"),
    path("readyz", HealthViewSet.as_view({"get": "ready"}), name="readyz"),
    # Not part of the API (nor of its OpenAPI document): for Prometheus.
    path("metrics", metrics_view, name="metrics"),
    path(
        "v1/openapi.json",
        SpectacularAPIView.as_view(
            authentication_classes=[],
            permission_classes=[],
            renderer_classes=[OpenApiJsonRenderer],
        ),
        name="openapi",
    ),
    path("docs", DocsView.as_view(), name="docs"),
    path("", include("events.urls")),
    path("", include("files.urls")),
    path("", include("chat.urls")),
    path("", include("adminapi.urls")),
]

handler400 = "platform_site.api.exception_handler.bad_request"
handler403 = "platform_site.api.exception_handler.permission_denied"
handler404 = "platform_site.api.exception_handler.page_not_found"
handler500 = "platform_site.api.exception_handler.server_error"
