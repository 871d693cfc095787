"""Who is calling, as the authenticators establish it (`request.auth`)."""

from dataclasses import dataclass

from rest_framework.request import Request

from bots.models import AccessToken, Bot, Workspace
from platform_site.api.authentication import request_principal


@dataclass(frozen=True)
class WorkspacePrincipal:
    """An account's token, acting in a workspace it is a member of."""

    token: AccessToken
    workspace: Workspace
    role: str

    @property
    def idempotency_scope(self) -> str:
        """Whose Idempotency-Keys these are (platform_site/api/idempotency.py): the token's,
        in this workspace."""
        return f"admin:{self.token.pk}:{self.workspace.pk}"


@dataclass(frozen=True)
class BotPrincipal(WorkspacePrincipal):
    """An account's token, acting for a bot of a workspace it is a member of."""

    bot: Bot

    @property
    def idempotency_scope(self) -> str:
        """Whose Idempotency-Keys these are: the token's, for this bot."""
        return f"runtime:{self.token.pk}:{self.bot.pk}"


def bot_principal(request: Request) -> BotPrincipal:
    """The caller of a view guarded by BotTokenAuthentication and a role permission."""
    return request_principal(request, BotPrincipal, "BotTokenAuthentication")


def workspace_principal(request: Request) -> WorkspacePrincipal:
    """The caller of a view guarded by WorkspaceTokenAuthentication and a role permission."""
    return request_principal(request, WorkspacePrincipal, "WorkspaceTokenAuthentication")
