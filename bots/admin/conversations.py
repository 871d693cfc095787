"""A bot's end users, conversations, participants and messages."""

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from bots.admin.credentials import ForgetsCredentials
from bots.admin.scoping import WorkspaceScoped
from bots.models import Conversation, Message, Participant, User


@admin.register(User)
class UserAdmin(ForgetsCredentials, WorkspaceScoped, admin.ModelAdmin):
    workspace_path = "bot__workspace"
    list_display = ["id", "chat_id", "name", "bot", "created_at"]
    list_filter = ["created_at"]
    search_fields = ["=id", "chat_id", "name", "=bot__id"]
    list_select_related = ["bot"]
    list_per_page = 50
    readonly_fields = ["id", "created_at", "updated_at"]
    raw_id_fields = ["bot", "integration"]


class ParticipantInline(WorkspaceScoped, admin.TabularInline):
    model = Participant
    workspace_path = "conversation__bot__workspace"
    extra = 0
    raw_id_fields = ["user"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Participant]:
        return super().get_queryset(request).select_related("user")


@admin.register(Conversation)
class ConversationAdmin(WorkspaceScoped, admin.ModelAdmin):
    workspace_path = "bot__workspace"
    list_display = ["id", "chat_id", "bot", "owner", "created_at", "updated_at"]
    list_filter = ["created_at"]
    search_fields = ["=id", "chat_id", "=bot__id"]
    list_select_related = ["bot", "owner"]
    list_per_page = 50
    readonly_fields = ["id", "created_at", "updated_at"]
    raw_id_fields = ["bot", "owner", "integration"]
    inlines = [ParticipantInline]


@admin.register(Participant)
class ParticipantAdmin(WorkspaceScoped, admin.ModelAdmin):
    workspace_path = "conversation__bot__workspace"
    list_display = ["user", "conversation", "created_at"]
    list_filter = ["created_at"]
    search_fields = ["=user__id", "user__chat_id", "=conversation__id"]
    list_select_related = ["user", "conversation"]
    list_per_page = 50
    raw_id_fields = ["user", "conversation"]


@admin.register(Message)
class MessageAdmin(WorkspaceScoped, admin.ModelAdmin):
    workspace_path = "bot__workspace"
    list_display = ["id", "type", "conversation", "user", "is_bot", "created_at"]
    list_filter = ["type", "is_bot", "created_at"]
    search_fields = ["=id", "=conversation__id", "=user__id"]
    list_select_related = ["conversation", "user"]
    list_per_page = 50
    readonly_fields = ["id", "created_at", "updated_at"]
    raw_id_fields = ["bot", "conversation", "user"]
