from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from bots.admin import ReadOnlyAdminMixin, WorkspaceScoped
from files.models import File, Passage
from files.services.files import file_delete, file_reindex
from platform_site.foundation.domain_errors import InvalidValue

_FIELDS = (
    "id",
    "bot",
    "key",
    "status",
    "failed_status_reason",
    "size",
    "content_type",
    "index",
    "max_chunk_length",
    "passages_link",
    "tags",
    "metadata",
    "access_policies",
    "expires_at",
    "created_at",
    "updated_at",
)
_EDITABLE = {"tags", "metadata", "access_policies", "expires_at"}


@admin.register(File)
class FileAdmin(WorkspaceScoped, admin.ModelAdmin):
    workspace_path = "bot__workspace"
    list_display = ["key", "id", "bot", "status", "size", "content_type", "tags", "updated_at"]
    list_filter = ["status", "content_type", "index"]
    search_fields = ["key", "=id", "=bot__id"]
    list_select_related = ["bot"]
    list_per_page = 50
    fields = _FIELDS
    # Content and status follow uploads and indexing; staff change the
    # labels a file carries, or re-index or delete it with the actions.
    readonly_fields = [name for name in _FIELDS if name not in _EDITABLE]
    actions = ["reindex", "delete_with_content"]

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        # A file is made by its bot through the API, which hands out the upload URL.
        return False

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        # Deleting through the service also deletes the stored bytes.
        actions.pop("delete_selected", None)
        return actions

    def delete_model(self, request: HttpRequest, obj: File) -> None:
        file_delete(file=obj)

    @admin.display(description="passages")
    def passages_link(self, file: File) -> str:
        url = reverse("admin:files_passage_changelist") + f"?file__id__exact={file.id}"
        return format_html('<a href="{}">{} passages</a>', url, file.passages.count())

    @admin.action(description="Re-index selected files", permissions=["change"])
    def reindex(self, request: HttpRequest, queryset: QuerySet[File]) -> None:
        queued = 0
        for file in queryset:
            try:
                file_reindex(file=file)
                queued += 1
            except InvalidValue as refused:
                self.message_user(request, refused.message, messages.WARNING)
        self.message_user(request, f"{queued} file(s) queued for indexing.", messages.SUCCESS)

    @admin.action(description="Delete selected files with their content", permissions=["delete"])
    def delete_with_content(self, request: HttpRequest, queryset: QuerySet[File]) -> None:
        count = 0
        for file in queryset:
            file_delete(file=file)
            count += 1
        self.message_user(request, f"{count} file(s) deleted.", messages.SUCCESS)


@admin.register(Passage)
class PassageAdmin(ReadOnlyAdminMixin, WorkspaceScoped, admin.ModelAdmin):
    """Passages come from indexing or from the API: edited by hand, they
    would no longer match their file."""

    workspace_path = "file__bot__workspace"

    list_display = ["file", "position", "type", "subtype", "page_number", "excerpt"]
    list_filter = ["type", "subtype"]
    search_fields = ["=id", "=file__id", "file__key"]
    list_select_related = ["file"]
    list_per_page = 50
    ordering = ["file", "position"]

    @admin.display(description="content")
    def excerpt(self, passage: Passage) -> str:
        return passage.content[:120]
