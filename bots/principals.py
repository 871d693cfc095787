"""Who is calling, as the authenticators establish it (`request.auth`)."""

from dataclasses import dataclass

from rest_framework.request import Request

from bots.models import AccessToken, Bot, Workspace


@dataclass(frozen=True)
class WorkspacePrincipal:
    """An account's token, acting in a workspace it is a member of."""

    token: AccessToken
    workspace: Workspace
    role: str

    @property
    def idempotency_scope(self) -> str:
        """Whose Idempotency-Keys these are (bots/idempotency.py): the token's,
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
    principal = request.auth
    if not isinstance(principal, BotPrincipal):
        raise TypeError("the view is not guarded by BotTokenAuthentication")
    return principal


def workspace_principal(request: Request) -> WorkspacePrincipal:
    """The caller of a view guarded by WorkspaceTokenAuthentication and a role permission."""
    principal = request.auth
    if not isinstance(principal, WorkspacePrincipal):
        raise TypeError("the view is not guarded by WorkspaceTokenAuthentication")
    return principal
