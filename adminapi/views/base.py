from rest_framework.request import Request

from bots.actors import Actor, actor_of
from platform_site.api.principals import workspace_principal
from platform_site.api.token_authentication import WorkspaceTokenAuthentication
from platform_site.api.views import ApiViewSet


class AdminViewSet(ApiViewSet):
    """Bearer token and x-workspace-id."""

    authentication_classes = [WorkspaceTokenAuthentication]


def request_actor(request: Request) -> Actor:
    """Who makes a change through the admin API: the token's account, from the client's address."""
    return actor_of(request._request, account=workspace_principal(request).token.account)
