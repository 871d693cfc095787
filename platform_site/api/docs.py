"""The API's documentation for people: Swagger UI over /v1/openapi.json,
every file of it served by this server (drf-spectacular-sidecar)."""

from typing import Any

from drf_spectacular.views import SpectacularSwaggerView
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response


class DocsView(SpectacularSwaggerView):
    authentication_classes = []
    permission_classes = [AllowAny]
    url_name = "openapi"

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        # A refusal (a POST: 405) is the one error body, not an HTML page.
        if getattr(response, "exception", False):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)
