from django.contrib import admin

from bots.admin import WorkspaceScoped
from bots.admin.credentials import ForgetsCredentials
from chat.models import ChatConnection


@admin.register(ChatConnection)
class ChatConnectionAdmin(ForgetsCredentials, WorkspaceScoped, admin.ModelAdmin):
    workspace_path = "bot__workspace"
    list_display = ["webhook_id", "name", "bot", "user_key_mode", "created_at"]
    list_filter = ["user_key_mode", "created_at"]
    search_fields = ["webhook_id", "name", "=bot__id"]
    list_select_related = ["bot"]
    list_per_page = 50
    readonly_fields = ["webhook_id", "created_at"]
    raw_id_fields = ["bot"]
