"""The Django admin of the bots app, one module per subject. Importing them
registers their model admins."""

from bots.admin import audit, bots, conversations, idempotency, members, tokens, workspaces
from bots.admin.scoping import ReadOnlyAdminMixin, WorkspaceScoped

__all__ = [
    "ReadOnlyAdminMixin",
    "WorkspaceScoped",
    "audit",
    "bots",
    "conversations",
    "idempotency",
    "members",
    "tokens",
    "workspaces",
]
