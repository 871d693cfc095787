"""Audit records in the admin: read only. A scoped account sees its
workspaces' records and its own (token records have no workspace)."""

import json
from typing import Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from bots.admin.scoping import ReadOnlyAdminMixin, WorkspaceScoped, managed_workspaces
from bots.models import AuditRecord

PLATFORM = "platform"


class ActorFilter(admin.SimpleListFilter):
    """The actors of the records the account sees, read from those records
    (not every account there is)."""

    title = "actor"
    parameter_name = "actor"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        records = model_admin.get_queryset(request)
        actors = records.order_by("actor_id").values_list("actor_id", "actor_label").distinct()
        labels: dict[str, str] = {}
        for actor_id, label in actors:
            key = PLATFORM if actor_id is None else str(actor_id)
            labels.setdefault(key, label or PLATFORM)
        return sorted(labels.items(), key=lambda item: item[1])

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value == PLATFORM:
            return queryset.filter(actor__isnull=True)
        if value and value.isdigit():
            return queryset.filter(actor_id=int(value))
        if value:
            return queryset.none()
        return queryset


@admin.register(AuditRecord)
class AuditRecordAdmin(ReadOnlyAdminMixin, WorkspaceScoped, admin.ModelAdmin):
    list_display = [
        "created_at",
        "action",
        "actor_label",
        "workspace",
        "target",
        "client_ip",
    ]
    list_filter = [
        "action",
        ActorFilter,
        ("workspace", admin.RelatedOnlyFieldListFilter),
        "created_at",
    ]
    date_hierarchy = "created_at"
    search_fields = ["=target_id", "actor_label", "=workspace__id", "workspace__name"]
    list_select_related = ["workspace"]
    list_per_page = 50
    ordering = ["-id"]
    fields = readonly_fields = (
        "id",
        "created_at",
        "action",
        "actor_label",
        "actor",
        "workspace",
        "target_type",
        "target_id",
        "client_ip",
        "changes_json",
    )

    def scope(self, queryset: QuerySet[Any], request: HttpRequest) -> QuerySet[Any]:
        workspaces = managed_workspaces(request)
        if workspaces is None:
            return queryset
        return queryset.filter(Q(workspace_id__in=list(workspaces)) | Q(actor_id=request.user.pk))

    @admin.display(description="target", ordering="target_id")
    def target(self, record: AuditRecord) -> str:
        return f"{record.target_type} {record.target_id}"

    @admin.display(description="changes")
    def changes_json(self, record: AuditRecord) -> SafeString:
        return format_html(
            '<pre id="audit-changes">{}</pre>',
            json.dumps(record.changes, indent=2, sort_keys=True, ensure_ascii=False),
        )
