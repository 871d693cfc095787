from collections.abc import Callable, Sequence
from typing import Any

from rest_framework.request import Request

from files.models import File
from platform_site.api.rate_limit import Policy
from platform_site.api.rate_limit_policies import bot_rate_limits, workspace_policy
from platform_site.api.throttling import RateLimitThrottle


class SignedUrlRateLimit(RateLimitThrottle):
    """A signed upload or download URL carries no credentials: its requests
    count against the limit of the file's workspace, with the workspace's
    API requests. The view names how it reads its URL (`signed_grant`)."""

    def policies(self, request: Request, view: Any) -> Sequence[Policy]:
        read_grant: Callable[[str], Any] = view.signed_grant
        # Forbidden when the URL is bad, as the view itself would answer.
        grant = read_grant(view.kwargs["token"])
        bot_id = File.objects.filter(pk=grant.file_id).values_list("bot_id", flat=True).first()
        limits = None if bot_id is None else bot_rate_limits(bot_id)
        if limits is None:  # the view answers 404
            return ()
        return (workspace_policy(limits),)
