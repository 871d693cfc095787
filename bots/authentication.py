"""Bearer token schemes of the runtime API (with x-bot-id) and of the admin
API (with x-workspace-id). A workspace or bot that the token's account is not
a member of is a 401 that does not say whether it exists."""

from typing import Any

from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from bots.credentials import credentials_for_bot, credentials_for_workspace
from bots.principals import BotPrincipal, WorkspacePrincipal
from bots.tokens import InvalidToken
from platform_site.api.authentication import HeaderAuthentication
from platform_site.api.ids import is_id


def _bearer(request: Request) -> str | None:
    header = request.headers.get("Authorization")
    if header is None:
        return None
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise AuthenticationFailed("The Authorization header must be 'Bearer <token>'")
    return raw.strip()


def _scope(request: Request, header: str, prefix: str, noun: str) -> str:
    value = request.headers.get(header)
    if not value:
        raise AuthenticationFailed(f"The {header} header is required")
    if not is_id(value, prefix):
        raise AuthenticationFailed(f"No {noun} {value[:40]!r} is reachable with this token")
    return value


class BotTokenAuthentication(HeaderAuthentication):
    """`Authorization: Bearer <token>` and `x-bot-id`."""

    def authenticate(self, request: Request) -> tuple[Any, BotPrincipal] | None:
        raw = _bearer(request)
        if raw is None:
            return None
        bot_id = _scope(request, "x-bot-id", "bot", "bot")
        try:
            credentials = credentials_for_bot(raw=raw, bot_id=bot_id)
        except InvalidToken as exc:
            raise AuthenticationFailed(str(exc)) from None
        if credentials.role is None or credentials.bot is None or credentials.workspace is None:
            raise AuthenticationFailed(f"No bot {bot_id!r} is reachable with this token")
        principal = BotPrincipal(
            token=credentials.token,
            workspace=credentials.workspace,
            role=credentials.role,
            bot=credentials.bot,
        )
        return credentials.token.account, principal


class WorkspaceTokenAuthentication(HeaderAuthentication):
    """`Authorization: Bearer <token>` and `x-workspace-id`."""

    def authenticate(self, request: Request) -> tuple[Any, WorkspacePrincipal] | None:
        raw = _bearer(request)
        if raw is None:
            return None
        workspace_id = _scope(request, "x-workspace-id", "wkspace", "workspace")
        try:
            credentials = credentials_for_workspace(raw=raw, workspace_id=workspace_id)
        except InvalidToken as exc:
            raise AuthenticationFailed(str(exc)) from None
        if credentials.role is None or credentials.workspace is None:
            raise AuthenticationFailed(
                f"No workspace {workspace_id!r} is reachable with this token"
            )
        principal = WorkspacePrincipal(
            token=credentials.token, workspace=credentials.workspace, role=credentials.role
        )
        return credentials.token.account, principal
