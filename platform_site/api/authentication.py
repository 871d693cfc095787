from typing import TypeVar

from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request


class HeaderAuthentication(BaseAuthentication):
    """Base of the header schemes. `authenticate` returns None when its header
    is absent (so the next scheme, or a 401, follows) and raises
    AuthenticationFailed when it is present but bad; `authenticate_header`
    makes DRF answer 401 with WWW-Authenticate rather than 403."""

    www_authenticate = "Bearer"

    def authenticate_header(self, request: Request) -> str:
        return self.www_authenticate


PrincipalT = TypeVar("PrincipalT")


def request_principal(request: Request, kind: type[PrincipalT], guard: str) -> PrincipalT:
    """The principal that `guard`, the view's authentication class, put on
    the request: a view that reads one its guard does not make is a bug."""
    principal = request.auth
    if not isinstance(principal, kind):
        raise TypeError(f"the view is not guarded by {guard}")
    return principal
