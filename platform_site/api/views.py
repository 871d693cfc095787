from typing import Any, ClassVar

from rest_framework.permissions import BasePermission
from rest_framework.views import APIView


class PermissionsByMethod(APIView):
    """Each HTTP method names its own permission classes; a method that names
    none gets the deny-by-default of REST_FRAMEWORK."""

    permissions_by_method: ClassVar[dict[str, list[type[BasePermission]]]] = {}

    def get_permissions(self) -> Any:
        classes = self.permissions_by_method.get(self.request.method or "")
        if classes is None:
            return super().get_permissions()
        return [cls() for cls in classes]
