from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from bots.admin import ReadOnlyAdminMixin, WorkspaceScoped
from events.models import DeliveryAttempt, Event, EventStatus
from events.services.events import event_cancel, events_retry
from platform_site.foundation.domain_errors import InvalidValue

ATTEMPT_FIELDS = (
    "number",
    "started_at",
    "duration_ms",
    "status_code",
    "outcome",
    "error",
    "response_excerpt",
    "url",
)


class DeliveryAttemptInline(ReadOnlyAdminMixin, WorkspaceScoped, admin.TabularInline):
    model = DeliveryAttempt
    workspace_path = "bot__workspace"
    fields = ATTEMPT_FIELDS
    readonly_fields = ATTEMPT_FIELDS
    ordering = ["number", "id"]
    extra = 0


@admin.register(Event)
class EventAdmin(WorkspaceScoped, admin.ModelAdmin):
    workspace_path = "bot__workspace"
    list_display = [
        "id",
        "type",
        "bot",
        "status",
        "due_at",
        "attempt_count",
        "next_attempt_at",
        "created_at",
    ]
    list_filter = ["status", "created_at", "due_at"]
    search_fields = ["=id", "type", "=bot__id", "=conversation__id", "=user__id"]
    list_select_related = ["bot"]
    list_per_page = 50
    raw_id_fields = ["bot", "conversation", "user", "message", "workflow", "integration"]
    readonly_fields = [
        "id",
        "bot",
        "type",
        "payload",
        "status",
        "failure_reason",
        "conversation",
        "user",
        "message",
        "workflow",
        "integration",
        "due_at",
        "next_attempt_at",
        "attempt_count",
        "first_attempt_at",
        "created_at",
        "updated_at",
    ]
    exclude = ["lease"]
    date_hierarchy = "created_at"
    inlines = [DeliveryAttemptInline]
    actions = ["retry_delivery", "cancel_scheduled"]

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        # Events come from the runtime API and the chat interface.
        return False

    @admin.action(description="Deliver the selected failed or ignored events again")
    def retry_delivery(self, request: HttpRequest, queryset: QuerySet[Event]) -> None:
        selected = list(queryset.values_list("id", flat=True))
        retried = events_retry(event_ids=selected)
        self.message_user(
            request,
            f"{retried} event(s) will be delivered again now; "
            f"{len(selected) - retried} skipped (only failed or ignored events are retried).",
            messages.SUCCESS if retried else messages.WARNING,
        )

    @admin.action(description="Cancel the selected scheduled events")
    def cancel_scheduled(self, request: HttpRequest, queryset: QuerySet[Event]) -> None:
        selected = list(queryset.select_related("bot"))
        canceled = 0
        for event in selected:
            if event.status != EventStatus.SCHEDULED:
                continue
            try:
                event_cancel(bot=event.bot, event_id=event.id)
                canceled += 1
            except InvalidValue:  # claimed by a worker meanwhile
                pass
        skipped = len(selected) - canceled
        self.message_user(
            request,
            f"{canceled} event(s) canceled; {skipped} skipped "
            "(only scheduled events are canceled).",
            messages.SUCCESS if canceled else messages.WARNING,
        )


@admin.register(DeliveryAttempt)
class DeliveryAttemptAdmin(ReadOnlyAdminMixin, WorkspaceScoped, admin.ModelAdmin):
    workspace_path = "bot__workspace"
    list_display = ["event", "number", "bot", "started_at", "status_code", "outcome", "duration_ms"]
    list_filter = ["outcome", "started_at", "status_code"]
    search_fields = ["=event__id", "=bot__id", "error"]
    list_select_related = ["event", "bot"]
    list_per_page = 50
    fields = ("event", "bot", *ATTEMPT_FIELDS)
    readonly_fields = ("event", "bot", *ATTEMPT_FIELDS)
    date_hierarchy = "started_at"
