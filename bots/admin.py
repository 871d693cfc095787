from typing import Any

from django.contrib import admin, messages
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest

from bots.models import (
    AccessToken,
    Bot,
    Conversation,
    Integration,
    IntegrationInstallation,
    Membership,
    Message,
    Participant,
    User,
    Workflow,
    Workspace,
)
from bots.services import bot_signing_secret_rotate

# A URL typed without a scheme means https (Django 6's default, chosen now).
URL_FIELDS: dict[type[models.Field], dict[str, Any]] = {models.URLField: {"assume_scheme": "https"}}


class ReadOnlyAdminMixin:
    """Rows the engine writes: staff read them, never edit them by hand."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["account"]


class BotInline(admin.TabularInline):
    model = Bot
    extra = 0
    fields = ["name", "dev", "deployed_at", "webhook_url"]
    show_change_link = True
    formfield_overrides = URL_FIELDS


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ["name", "id", "created_at"]
    search_fields = ["name", "id"]
    readonly_fields = ["id", "created_at", "updated_at"]
    inlines = [MembershipInline, BotInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["account", "workspace", "role", "created_at"]
    list_filter = ["role"]
    search_fields = ["account__email", "account__username", "workspace__name", "workspace__id"]
    list_select_related = ["account", "workspace"]
    autocomplete_fields = ["account", "workspace"]


@admin.register(AccessToken)
class AccessTokenAdmin(admin.ModelAdmin):
    list_display = [
        "prefix",
        "name",
        "account",
        "created_at",
        "expires_at",
        "revoked_at",
        "last_used_at",
    ]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter), "expires_at", "created_at"]
    search_fields = ["prefix", "name", "account__email", "account__username"]
    list_select_related = ["account"]
    readonly_fields = ["prefix", "created_at", "last_used_at"]
    fields = ["account", "name", "prefix", "created_at", "expires_at", "revoked_at", "last_used_at"]
    autocomplete_fields = ["account"]

    def has_add_permission(self, request: object) -> bool:
        # A token's raw value exists only when it is made, by `create_token`.
        return False


class InstallationInline(admin.TabularInline):
    model = IntegrationInstallation
    extra = 0
    autocomplete_fields = ["integration"]


@admin.register(Bot)
class BotAdmin(admin.ModelAdmin):
    list_display = ["name", "id", "workspace", "dev", "deployed_at", "updated_at"]
    list_filter = ["dev", ("deployed_at", admin.EmptyFieldListFilter), "created_at"]
    search_fields = ["name", "id", "workspace__name", "workspace__id"]
    list_select_related = ["workspace"]
    readonly_fields = [
        "id",
        "signing_secret",
        "previous_signing_secret_expires_at",
        "created_at",
        "updated_at",
    ]
    autocomplete_fields = ["workspace"]
    inlines = [InstallationInline]
    formfield_overrides = URL_FIELDS
    actions = ["rotate_signing_secret"]

    @admin.action(
        description="Rotate the webhook signing secret (the old one signs too for a while)",
        permissions=["change"],
    )
    def rotate_signing_secret(self, request: HttpRequest, queryset: QuerySet[Bot]) -> None:
        for bot in queryset:
            bot_signing_secret_rotate(bot=bot)
        self.message_user(
            request,
            f"Rotated the signing secret of {len(queryset)} bot(s). Deliveries carry a "
            "signature with the previous secret too until the time shown on each bot.",
            messages.SUCCESS,
        )


@admin.register(Integration)
class IntegrationAdmin(admin.ModelAdmin):
    list_display = ["name", "version", "title", "id", "created_at"]
    search_fields = ["name", "title", "id"]
    readonly_fields = ["id", "created_at"]


@admin.register(IntegrationInstallation)
class IntegrationInstallationAdmin(admin.ModelAdmin):
    list_display = ["alias", "integration", "bot", "enabled", "created_at"]
    list_filter = ["enabled"]
    search_fields = ["alias", "bot__id", "bot__name", "integration__name"]
    list_select_related = ["integration", "bot"]
    autocomplete_fields = ["bot", "integration"]


@admin.register(Workflow)
class WorkflowAdmin(admin.ModelAdmin):
    list_display = ["name", "id", "bot", "status", "created_at"]
    list_filter = ["status", "created_at"]
    search_fields = ["name", "id", "bot__id"]
    list_select_related = ["bot"]
    readonly_fields = ["id", "created_at", "updated_at"]
    raw_id_fields = ["bot", "conversation", "user"]


@admin.register(User)
class UserAdmin(admin.ModelAdmin):
    list_display = ["id", "chat_id", "name", "bot", "created_at"]
    list_filter = ["created_at"]
    search_fields = ["id", "chat_id", "name", "bot__id"]
    list_select_related = ["bot"]
    readonly_fields = ["id", "created_at", "updated_at"]
    raw_id_fields = ["bot", "integration"]
    formfield_overrides = URL_FIELDS


class ParticipantInline(admin.TabularInline):
    model = Participant
    extra = 0
    raw_id_fields = ["user"]


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ["id", "chat_id", "bot", "owner", "created_at", "updated_at"]
    list_filter = ["created_at"]
    search_fields = ["id", "chat_id", "bot__id"]
    list_select_related = ["bot", "owner"]
    readonly_fields = ["id", "created_at", "updated_at"]
    raw_id_fields = ["bot", "owner", "integration"]
    inlines = [ParticipantInline]


@admin.register(Participant)
class ParticipantAdmin(admin.ModelAdmin):
    list_display = ["user", "conversation", "created_at"]
    search_fields = ["user__id", "user__chat_id", "conversation__id"]
    list_select_related = ["user", "conversation"]
    raw_id_fields = ["user", "conversation"]


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["id", "type", "conversation", "user", "is_bot", "created_at"]
    list_filter = ["type", "is_bot", "created_at"]
    search_fields = ["id", "conversation__id", "user__id"]
    list_select_related = ["conversation", "user"]
    readonly_fields = ["id", "created_at", "updated_at"]
    raw_id_fields = ["bot", "conversation", "user"]
