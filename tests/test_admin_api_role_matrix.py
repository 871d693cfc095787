"""Every admin route and method, for each of the six roles: allowed as
bots/roles.py says, else 403; and the 401s of the admin credentials."""

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.urls import URLPattern

from adminapi import urls as admin_urls
from bots.models import Role
from bots.roles import ALLOWED_ROLES, Action
from tests.conftest import admin_api, assert_error
from tests.factories import BotFactory, MembershipFactory, WorkspaceFactory, token_for

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class Route:
    name: str
    method: str
    path: str
    action: Action
    success: int = 200
    body: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


ROUTES = [
    Route("admin-bots", "GET", "/v1/admin/bots", Action.READ_BOTS),
    Route("admin-bots", "POST", "/v1/admin/bots", Action.WRITE_BOTS, 201, {"name": "New"}),
    Route("admin-bot", "GET", "/v1/admin/bots/{bot}", Action.READ_BOTS),
    Route("admin-bot", "PUT", "/v1/admin/bots/{bot}", Action.WRITE_BOTS, body={"name": "Renamed"}),
    Route("admin-bot", "DELETE", "/v1/admin/bots/{bot}", Action.WRITE_BOTS),
    Route("admin-bot-logs", "GET", "/v1/admin/bots/{bot}/logs", Action.READ_RUNTIME),
    Route("admin-members", "GET", "/v1/admin/workspace-members", Action.READ_MEMBERS),
    Route(
        "admin-members",
        "POST",
        "/v1/admin/workspace-members",
        Action.MANAGE_MEMBERS,
        201,
        {"email": "new@example.test", "role": "developer"},
    ),
    Route("admin-member-me", "GET", "/v1/admin/workspace-members/me", Action.READ_MEMBERS),
    Route(
        "admin-member",
        "PUT",
        "/v1/admin/workspace-members/{member}",
        Action.MANAGE_MEMBERS,
        body={"role": "viewer"},
    ),
    Route("admin-member", "DELETE", "/v1/admin/workspace-members/{member}", Action.MANAGE_MEMBERS),
    Route(
        "admin-audit-records",
        "GET",
        "/v1/admin/workspaces/{workspace}/audit-records",
        Action.READ_AUDIT,
    ),
]
ROLES = [role.value for role in Role]


def test_the_routes_here_are_every_admin_route_and_method():
    served = set()
    for pattern in admin_urls.urlpatterns:
        assert isinstance(pattern, URLPattern)
        viewset = pattern.callback.cls
        for method, action in pattern.callback.actions.items():
            if method == "head":  # DRF maps it to GET's action on the first request
                continue
            permissions = viewset.permissions_by_action[action]
            method = method.upper()
            served.add((pattern.name, method))
            route = next(r for r in ROUTES if (r.name, r.method) == (pattern.name, method))
            # The view guards the method with the action this test expects of it.
            assert [p.action for p in permissions] == [route.action], route
    assert served == {(r.name, r.method) for r in ROUTES}
    assert len(ROUTES) == len(served)


@pytest.fixture
def scene(workspace):
    """A bot and a member other than the caller, for the routes that name them."""
    MembershipFactory(workspace=workspace, role=Role.OWNER)
    return {
        "bot": BotFactory(workspace=workspace).id,
        "member": MembershipFactory(workspace=workspace, role=Role.DEVELOPER).pk,
        "workspace": workspace.id,
    }


def call(client: Any, route: Route, scene: dict[str, Any]) -> Any:
    path = route.path.format(**scene)
    body = json.dumps(route.body)
    return client.generic(route.method, path, data=body, content_type="application/json")


def route_of(method: str, path: str) -> Route:
    return next(r for r in ROUTES if (r.method, r.path) == (method, path))


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_each_role_on_each_route(admin_client, scene, route, role):
    response = call(admin_client(role), route, scene)
    if role in ALLOWED_ROLES[route.action]:
        assert response.status_code == route.success, response.content
    else:
        body = assert_error(response, 403, "Forbidden")
        assert role in body["message"]


BOT = "/v1/admin/bots/{bot}"
MEMBERS = "/v1/admin/workspace-members"
AUDIT = "/v1/admin/workspaces/{workspace}/audit-records"


@pytest.mark.parametrize(
    ("role", "method", "path", "allowed"),
    [
        ("billing", "GET", BOT, False),
        ("billing", "GET", "/v1/admin/bots", False),
        ("viewer", "POST", "/v1/admin/bots", False),
        ("viewer", "GET", BOT, True),
        ("developer", "DELETE", BOT, True),
        ("developer", "GET", AUDIT, False),
        ("manager", "GET", AUDIT, True),
        ("manager", "POST", MEMBERS, False),
        ("administrator", "PUT", MEMBERS + "/{member}", True),
        ("owner", "POST", MEMBERS, True),
        ("billing", "GET", MEMBERS, True),
    ],
)
def test_a_few_cells_of_the_matrix_spelled_out(admin_client, scene, role, method, path, allowed):
    route = route_of(method, path)
    response = call(admin_client(role), route, scene)
    assert (response.status_code == route.success) is allowed, (str(route), response.content)
    if not allowed:
        assert_error(response, 403, "Forbidden")


@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_without_a_token_is_401_with_a_challenge(api_client, scene, route):
    api_client.credentials(HTTP_X_WORKSPACE_ID=scene["workspace"])
    response = call(api_client, route, scene)
    assert_error(response, 401, "Unauthorized")
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_an_unknown_token_is_401(scene, route):
    client = admin_api("bp_pat_" + "x" * 43, scene["workspace"])
    response = call(client, route, scene)
    assert_error(response, 401, "Unauthorized")
    assert response.headers["WWW-Authenticate"]


@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_a_workspace_the_account_is_not_a_member_of_is_401(scene, route):
    elsewhere = MembershipFactory(workspace=WorkspaceFactory(), role=Role.OWNER)
    client = admin_api(token_for(elsewhere.account), scene["workspace"])
    assert_error(call(client, route, scene), 401, "Unauthorized")


@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_without_a_workspace_header_is_401(scene, route):
    elsewhere = MembershipFactory(workspace=WorkspaceFactory(), role=Role.OWNER)
    client = admin_api(token_for(elsewhere.account), "")
    assert_error(call(client, route, scene), 401, "Unauthorized")
