from django.urls import path

from adminapi.views.audit import AuditRecordViewSet
from adminapi.views.bots import BotViewSet
from adminapi.views.members import MemberViewSet

urlpatterns = [
    path("v1/admin/bots", BotViewSet.as_view({"get": "list", "post": "create"}), name="admin-bots"),
    path(
        "v1/admin/bots/<str:bot_id>",
        BotViewSet.as_view({"get": "retrieve", "put": "update", "delete": "destroy"}),
        name="admin-bot",
    ),
    path(
        "v1/admin/bots/<str:bot_id>/logs",
        BotViewSet.as_view({"get": "logs"}),
        name="admin-bot-logs",
    ),
    path(
        "v1/admin/workspace-members",
        MemberViewSet.as_view({"get": "list", "post": "create"}),
        name="admin-members",
    ),
    # Before the member route, which "me" would otherwise reach as an id.
    path(
        "v1/admin/workspace-members/me",
        MemberViewSet.as_view({"get": "me"}),
        name="admin-member-me",
    ),
    path(
        "v1/admin/workspace-members/<str:member_id>",
        MemberViewSet.as_view({"put": "update", "delete": "destroy"}),
        name="admin-member",
    ),
    path(
        "v1/admin/workspaces/<str:workspace_id>/audit-records",
        AuditRecordViewSet.as_view({"get": "list"}),
        name="admin-audit-records",
    ),
]
