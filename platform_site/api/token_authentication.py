"""Bearer token schemes of the runtime API (with x-bot-id) and of the admin
API (with x-workspace-id). A workspace or bot that the token's account is not
a member of is a 401 that does not say whether it exists."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from bots.token_checks import InvalidToken
from platform_site.api.authentication import HeaderAuthentication
from platform_site.api.credentials import credentials_for_bot, credentials_for_workspace
from platform_site.api.principals import WorkspacePrincipal
from platform_site.foundation.ids import is_id


def _bearer(request: Request) -> str | None:
    header = request.headers.get("Authorization")
    if header is None:
        return None
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise AuthenticationFailed("The Authorization header must be 'Bearer <token>'")
    return raw.strip()


class _ScopedTokenAuthentication(HeaderAuthentication):
    """A bearer token and a header naming where it acts (`scope_header`)."""

    scope_header: str
    scope_prefix: str
    scope_noun: str

    def lookup(self, raw: str, scope_id: str) -> WorkspacePrincipal | None:
        raise NotImplementedError

    def authenticate(self, request: Request) -> tuple[Any, WorkspacePrincipal] | None:
        raw = _bearer(request)
        if raw is None:
            return None
        scope_id = request.headers.get(self.scope_header)
        if not scope_id:
            raise AuthenticationFailed(f"The {self.scope_header} header is required")
        unreachable = f"No {self.scope_noun} {scope_id[:40]!r} is reachable with this token"
        if not is_id(scope_id, self.scope_prefix):
            raise AuthenticationFailed(unreachable)
        try:
            principal = self.lookup(raw, scope_id)
        except InvalidToken as exc:
            raise AuthenticationFailed(str(exc)) from None
        if principal is None:
            raise AuthenticationFailed(unreachable)
        return principal.token.account, principal


class BotTokenAuthentication(_ScopedTokenAuthentication):
    """`Authorization: Bearer <token>` and `x-bot-id`."""

    scope_header, scope_prefix, scope_noun = "x-bot-id", "bot", "bot"

    def lookup(self, raw: str, scope_id: str) -> WorkspacePrincipal | None:
        return credentials_for_bot(raw=raw, bot_id=scope_id)


class WorkspaceTokenAuthentication(_ScopedTokenAuthentication):
    """`Authorization: Bearer <token>` and `x-workspace-id`."""

    scope_header, scope_prefix, scope_noun = "x-workspace-id", "wkspace", "workspace"

    def lookup(self, raw: str, scope_id: str) -> WorkspacePrincipal | None:
        return credentials_for_workspace(raw=raw, workspace_id=scope_id)


# How the schemes appear in the OpenAPI document: defined with the classes,
# so that whatever authenticates with one has its scheme registered.
_BEARER = {"type": "http", "scheme": "bearer", "description": "A personal access token, bp_pat_…"}


class BotTokenScheme(OpenApiAuthenticationExtension):
    target_class = BotTokenAuthentication
    name = ["runtimeToken", "botId"]

    def get_security_definition(self, auto_schema: Any) -> list[dict[str, str]]:
        return [_BEARER, {"type": "apiKey", "in": "header", "name": "x-bot-id"}]


class WorkspaceTokenScheme(OpenApiAuthenticationExtension):
    target_class = WorkspaceTokenAuthentication
    name = ["adminToken", "workspaceId"]

    def get_security_definition(self, auto_schema: Any) -> list[dict[str, str]]:
        return [_BEARER, {"type": "apiKey", "in": "header", "name": "x-workspace-id"}]
