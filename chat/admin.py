from django.contrib import admin

from bots.admin import ReadOnlyAdminMixin, WorkspaceScoped
from bots.admin.credentials import ForgetsCredentials
from chat.models import ChatConnection, MessageFeedback


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


@admin.register(MessageFeedback)
class MessageFeedbackAdmin(ReadOnlyAdminMixin, WorkspaceScoped, admin.ModelAdmin):
    """What end users thought of messages (the official webchat's thumbs):
    theirs to give, read only here."""

    workspace_path = "message__bot__workspace"
    list_display = ["value", "comment", "message", "user", "updated_at"]
    list_filter = ["value", "updated_at"]
    search_fields = ["=message__id", "=user__chat_id", "comment"]
    list_select_related = ["message", "user"]
    list_per_page = 50
    fields = ["value", "comment", "message", "user", "created_at", "updated_at"]
