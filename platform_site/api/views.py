from typing import Any, ClassVar

from rest_framework.exceptions import MethodNotAllowed
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView


class ApiView(APIView):
    """Base of every endpoint.

    - A method the route does not serve is a 405 before credentials are
      looked at: the answer does not depend on who asks.
    - Each HTTP method names its own permission classes; a method that names
      none gets the deny-by-default of REST_FRAMEWORK.
    """

    permissions_by_method: ClassVar[dict[str, list[type[BasePermission]]]] = {}

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        method = (request.method or "").lower()
        if method not in self.http_method_names or not hasattr(self, method):
            raise MethodNotAllowed(request.method or "")
        super().initial(request, *args, **kwargs)

    def get_permissions(self) -> Any:
        classes = self.permissions_by_method.get(self.request.method or "")
        if classes is None:
            return super().get_permissions()
        return [cls() for cls in classes]
