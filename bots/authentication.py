"""Bearer token schemes of the runtime API (with x-bot-id) and of the admin
API (with x-workspace-id). A workspace or bot that the token's account is not
a member of is a 401 that does not say whether it exists."""

from typing import Any

from django.db.models import OuterRef, Subquery
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from bots.models import AccessToken, Bot, Membership
from bots.principals import BotPrincipal, WorkspacePrincipal
from bots.tokens import InvalidToken, access_token_authenticate
from platform_site.api.authentication import HeaderAuthentication
from platform_site.api.ids import is_id


def _bearer_token(request: Request) -> AccessToken | None:
    header = request.headers.get("Authorization")
    if header is None:
        return None
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise AuthenticationFailed("The Authorization header must be 'Bearer <token>'")
    try:
        return access_token_authenticate(raw=raw.strip())
    except InvalidToken as exc:
        raise AuthenticationFailed(str(exc)) from None


def _role_subquery(account_id: int) -> Subquery:
    return Subquery(
        Membership.objects.filter(workspace=OuterRef("workspace_id"), account_id=account_id).values(
            "role"
        )[:1]
    )


class BotTokenAuthentication(HeaderAuthentication):
    """`Authorization: Bearer <token>` and `x-bot-id`."""

    def authenticate(self, request: Request) -> tuple[Any, BotPrincipal] | None:
        token = _bearer_token(request)
        if token is None:
            return None
        bot_id = request.headers.get("x-bot-id")
        if not bot_id:
            raise AuthenticationFailed("The x-bot-id header is required")
        if not is_id(bot_id, "bot"):
            raise AuthenticationFailed(f"No bot {bot_id!r} is reachable with this token")
        bot = (
            Bot.objects.select_related("workspace")
            .annotate(role=_role_subquery(token.account_id))
            .filter(id=bot_id)
            .first()
        )
        role = getattr(bot, "role", None)
        if bot is None or role is None:
            raise AuthenticationFailed(f"No bot {bot_id!r} is reachable with this token")
        principal = BotPrincipal(token=token, workspace=bot.workspace, role=role, bot=bot)
        return token.account, principal


class WorkspaceTokenAuthentication(HeaderAuthentication):
    """`Authorization: Bearer <token>` and `x-workspace-id`."""

    def authenticate(self, request: Request) -> tuple[Any, WorkspacePrincipal] | None:
        token = _bearer_token(request)
        if token is None:
            return None
        workspace_id = request.headers.get("x-workspace-id")
        if not workspace_id:
            raise AuthenticationFailed("The x-workspace-id header is required")
        if not is_id(workspace_id, "wkspace"):
            raise AuthenticationFailed(
                f"No workspace {workspace_id!r} is reachable with this token"
            )
        membership = (
            Membership.objects.select_related("workspace")
            .filter(workspace_id=workspace_id, account_id=token.account_id)
            .first()
        )
        if membership is None:
            raise AuthenticationFailed(
                f"No workspace {workspace_id!r} is reachable with this token"
            )
        principal = WorkspacePrincipal(
            token=token, workspace=membership.workspace, role=membership.role
        )
        return token.account, principal
