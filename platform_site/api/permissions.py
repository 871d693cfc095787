"""One permission class per row of the role matrix. Each denies unless the
caller authenticated with a token scheme and its role allows the action."""

from typing import Any, ClassVar

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from bots.roles import Action, role_allows
from platform_site.api.principals import WorkspacePrincipal


class _RoleAllows(BasePermission):
    action: ClassVar[Action]

    def has_permission(self, request: Request, view: Any) -> bool:
        principal = request.auth
        if not isinstance(principal, WorkspacePrincipal):
            return False
        self.message = f"Your role ({principal.role}) does not allow: {self.action}"
        return role_allows(principal.role, self.action)


class CanReadBots(_RoleAllows):
    action = Action.READ_BOTS


class CanWriteBots(_RoleAllows):
    action = Action.WRITE_BOTS


class CanWriteEvents(_RoleAllows):
    action = Action.WRITE_EVENTS


class CanWriteMessages(_RoleAllows):
    action = Action.WRITE_MESSAGES


class CanReadRuntime(_RoleAllows):
    action = Action.READ_RUNTIME


class CanReadChat(_RoleAllows):
    action = Action.READ_CHAT


class CanWriteFiles(_RoleAllows):
    action = Action.WRITE_FILES


class CanReadMembers(_RoleAllows):
    action = Action.READ_MEMBERS


class CanReadAudit(_RoleAllows):
    action = Action.READ_AUDIT


class CanManageMembers(_RoleAllows):
    action = Action.MANAGE_MEMBERS
