from django.contrib import admin

from bots.admin import URL_FIELDS
from files.models import File, Passage


@admin.register(File)
class FileAdmin(admin.ModelAdmin):
    list_display = ["key", "id", "bot", "status", "size", "content_type", "updated_at"]
    list_filter = ["status", "content_type", "index"]
    search_fields = ["key", "id", "bot__id"]
    list_select_related = ["bot"]
    readonly_fields = ["id", "created_at", "updated_at"]
    raw_id_fields = ["bot"]


@admin.register(Passage)
class PassageAdmin(admin.ModelAdmin):
    list_display = ["id", "file", "position", "type", "subtype", "page_number"]
    list_filter = ["type", "subtype"]
    search_fields = ["id", "file__id", "file__key"]
    list_select_related = ["file"]
    raw_id_fields = ["file"]
    formfield_overrides = URL_FIELDS

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        # Passages come from indexing; editing one by hand would desynchronise it.
        return False
