from django.urls import path

from adminapi.views.audit import AuditRecordCollectionView
from adminapi.views.bots import BotCollectionView, BotDetailView
from adminapi.views.logs import BotLogsView
from adminapi.views.members import MemberCollectionView, MemberDetailView, MyMembershipView

urlpatterns = [
    path("v1/admin/bots", BotCollectionView.as_view(), name="admin-bots"),
    path("v1/admin/bots/<str:bot_id>", BotDetailView.as_view(), name="admin-bot"),
    path("v1/admin/bots/<str:bot_id>/logs", BotLogsView.as_view(), name="admin-bot-logs"),
    path("v1/admin/workspace-members", MemberCollectionView.as_view(), name="admin-members"),
    # Before the member route, which "me" would otherwise reach as an id.
    path("v1/admin/workspace-members/me", MyMembershipView.as_view(), name="admin-member-me"),
    path(
        "v1/admin/workspace-members/<str:member_id>",
        MemberDetailView.as_view(),
        name="admin-member",
    ),
    path(
        "v1/admin/workspaces/<str:workspace_id>/audit-records",
        AuditRecordCollectionView.as_view(),
        name="admin-audit-records",
    ),
]
