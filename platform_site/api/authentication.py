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
