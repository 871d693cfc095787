from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from chat.authentication import USER_KEY_CHALLENGE
from chat.models import UserKeyMode
from chat.principals import ChatAdmin, ChatPrincipal, SignedKeyHolder, chat_connection
from platform_site.api.errors import Unauthorized


class IsChatUser(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, ChatPrincipal)


class IsChatAdmin(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, ChatAdmin)


class HoldsSignedKey(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, SignedKeyHolder)


class IssuesUserKeys(BasePermission):
    """POST /users, which needs no key, on a connection whose server issues
    keys. In manual mode the answer is a 401: the client lacks a key that
    only the operator's service can sign."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if chat_connection(request).user_key_mode == UserKeyMode.MANUAL:
            raise Unauthorized(
                "This chat does not issue user keys: its operator signs them. "
                "Resume with POST /users/get-or-create and the key you were given",
                headers={"WWW-Authenticate": USER_KEY_CHALLENGE},
            )
        return True
