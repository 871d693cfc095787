from django.contrib import admin

from events.models import Event


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ["id", "type", "bot", "status", "due_at", "created_at"]
    list_filter = ["status", "created_at", "due_at"]
    search_fields = ["id", "type", "bot__id", "conversation__id", "user__id"]
    list_select_related = ["bot"]
    readonly_fields = ["id", "created_at", "updated_at"]
    raw_id_fields = ["bot", "conversation", "user", "message", "workflow", "integration"]
    date_hierarchy = "created_at"
