from collections.abc import Sequence
from typing import Any

from rest_framework.request import Request

from platform_site.api.principals import WorkspacePrincipal
from platform_site.api.rate_limit import Policy
from platform_site.api.rate_limit_policies import (
    token_rate_limit,
    workspace_policy,
    workspace_rate_limits,
)
from platform_site.api.throttling import RateLimitThrottle


class TokenRateLimit(RateLimitThrottle):
    """Runtime and admin API: the workspace's limit (its tokens together) and
    the token's own ceiling, whatever workspace it acts in."""

    def policies(self, request: Request, view: Any) -> Sequence[Policy]:
        principal = request.auth
        if not isinstance(principal, WorkspacePrincipal):
            return ()
        token = principal.token
        # By digest: unlike a row id, never the same for two tokens of two databases.
        policies = [Policy("token", f"token:{token.token_hash}", token_rate_limit(token))]
        limits = workspace_rate_limits(principal.workspace.id)
        if limits is not None:  # else the workspace went away meanwhile
            policies.insert(0, workspace_policy(limits))
        return policies
