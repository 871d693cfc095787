from functools import cache
from typing import Any, ClassVar

from django.conf import settings
from django.utils.module_loading import import_string
from drf_spectacular.utils import OpenApiParameter
from rest_framework.exceptions import MethodNotAllowed
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.viewsets import ViewSet

from platform_site.api.rate_limit import Decision, rate_limit_headers


@cache
def api_throttle_classes() -> list[type[BaseThrottle]]:
    return [import_string(path) for path in settings.API_THROTTLE_CLASSES]


class DenyAll(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        return False


class ApiViewSet(ViewSet):
    """Base of every endpoint: one class per resource, whose actions serve
    its routes, mapped to the contract's paths in the app's urls.py with
    `as_view({"get": "list", "post": "create"})` (no router: the paths are
    the contract's, not a router's convention).

    - A method the route's mapping does not name is a 405 before credentials
      are looked at: the answer does not depend on who asks. OPTIONS is not
      served (CORS preflights are answered by their middleware).
    - Each action names its own permission classes in `permissions_by_action`
      (HEAD runs GET's action, so it is held to its permissions); an action
      that names none is denied.

    For the OpenAPI document (platform_site.api.schema.ApiAutoSchema),
    `path_parameters` describes path variables that are not ids of the kind
    their name says, and `error_statuses` the error statuses the resource
    answers beyond those that follow from its shape (an action lists its own
    in its `responses`).
    """

    http_method_names = ["get", "post", "put", "patch", "delete", "head"]
    # None: settings.API_THROTTLE_CLASSES.
    throttle_classes: Any = None
    # Whether its requests count against rate limits (said by the OpenAPI document).
    rate_limited: ClassVar[bool] = True
    # Where the request stands against its rate limits, once a throttle
    # (platform_site/api/throttling.py) counted it; its answer says so.
    rate_limit: Decision | None = None
    permissions_by_action: ClassVar[dict[str, list[type[BasePermission]]]] = {}
    path_parameters: ClassVar[list[OpenApiParameter]] = []
    error_statuses: ClassVar[tuple[int, ...]] = ()

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        method = (request.method or "").lower()
        if method not in self.http_method_names or not hasattr(self, method):
            raise MethodNotAllowed(request.method or "")
        super().initial(request, *args, **kwargs)

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        if self.rate_limit is not None:
            for name, value in rate_limit_headers(self.rate_limit).items():
                response[name] = value
        return response

    def get_throttles(self) -> list[BaseThrottle]:
        classes = self.throttle_classes
        return [cls() for cls in (api_throttle_classes() if classes is None else classes)]

    def get_permissions(self) -> Any:
        classes = self.permissions_by_action.get(self.action or "", [DenyAll])
        return [cls() for cls in classes]
