"""Bots in the admin. Creating, editing, deleting a bot and rotating its
signing secret go through bots.services, which write the audit records."""

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.views.decorators.http import require_POST

from bots.actors import actor_of
from bots.admin.saved import adopt
from bots.admin.scoping import WorkspaceScoped
from bots.models import Bot, Integration, IntegrationInstallation, Workflow
from bots.services.bots import (
    BOT_UPDATABLE_FIELDS,
    bot_create,
    bot_delete,
    bot_signing_secret_rotate,
    bot_update,
)

RECENT_EVENTS = 20


class InstallationInline(WorkspaceScoped, admin.TabularInline):
    """Installed integrations; new ones are added on the installation page
    (a choice of integration on every row would cost a query a row)."""

    model = IntegrationInstallation
    workspace_path = "bot__workspace"
    fields = ["alias", "integration", "enabled", "configuration", "created_at"]
    readonly_fields = ["integration", "created_at"]
    extra = 0
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[IntegrationInstallation]:
        return super().get_queryset(request).select_related("integration")


# What staff may change on a bot is what an update may (the audit record
# names the same fields); the rest is shown, read only, once it exists.
_EDITABLE = BOT_UPDATABLE_FIELDS
_SHOWN_ONCE_MADE = (
    "id",
    "workspace",
    "deployed_at",
    "signing_secret",
    "previous_signing_secret_expires_at",
    "created_at",
    "updated_at",
    "webchat_pages",
    "recent_events",
)


@admin.register(Bot)
class BotAdmin(WorkspaceScoped, admin.ModelAdmin):
    list_display = [
        "name",
        "id",
        "workspace",
        "delivery_format",
        "dev",
        "deployed_at",
        "updated_at",
    ]
    list_filter = [
        "dev",
        "delivery_format",
        ("deployed_at", admin.EmptyFieldListFilter),
        "created_at",
        ("workspace", admin.RelatedOnlyFieldListFilter),
    ]
    search_fields = ["name", "=id", "workspace__name", "=workspace__id"]
    list_select_related = ["workspace"]
    list_per_page = 50
    autocomplete_fields = ["workspace"]
    actions = ["rotate_signing_secret"]

    def get_fields(self, request: HttpRequest, obj: Bot | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("workspace", *_EDITABLE)
        # The workspace after the id, where a reader looks for whose bot it is.
        return (*_SHOWN_ONCE_MADE[:2], *_EDITABLE, *_SHOWN_ONCE_MADE[2:])

    def get_readonly_fields(self, request: HttpRequest, obj: Bot | None = None) -> list[str]:
        return [] if obj is None else list(_SHOWN_ONCE_MADE)

    def get_inlines(self, request: HttpRequest, obj: Bot | None) -> list[Any]:
        # Integrations are installed on the installation page, once the bot exists.
        return [] if obj is None else [InstallationInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Bot]:
        return super().get_queryset(request).select_related("workspace")

    def save_model(self, request: HttpRequest, obj: Bot, form: Any, change: bool) -> None:
        actor = actor_of(request)
        if not change:
            fields = {name: getattr(obj, name) for name in BOT_UPDATABLE_FIELDS}
            adopt(obj, bot_create(workspace=obj.workspace, actor=actor, **fields))
            return
        # The form changed `obj` already; the service compares with what is stored.
        stored = Bot.objects.select_related("workspace").get(pk=obj.pk)
        edits = {name: getattr(obj, name) for name in form.changed_data}
        adopt(obj, bot_update(bot=stored, actor=actor, **edits))

    def delete_model(self, request: HttpRequest, obj: Bot) -> None:
        bot_delete(bot=obj, actor=actor_of(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Bot]) -> None:
        actor = actor_of(request)
        for bot in queryset.select_related("workspace"):
            bot_delete(bot=bot, actor=actor)

    @admin.display(description="webchat pages")
    def webchat_pages(self, bot: Bot) -> SafeString:
        """Where the bot's end users talk to it: the official webchat, one
        page per chat connection."""
        webhook_ids = bot.chat_connections.order_by("created_at").values_list(
            "webhook_id", flat=True
        )
        links = format_html_join(
            "<br>",
            '<a href="{}" target="_blank" rel="noopener">{}</a>',
            ((reverse("chat-webchat", args=[webhook_id]),) * 2 for webhook_id in webhook_ids),
        )
        return links or format_html("{}", "none: the bot has no chat connection")

    @admin.display(description=f"recent events (newest {RECENT_EVENTS})")
    def recent_events(self, bot: Bot) -> SafeString:
        events = bot.events.order_by("-id")[:RECENT_EVENTS]
        rows = format_html_join(
            "",
            '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>',
            (
                (
                    reverse("admin:events_event_change", args=[event.id]),
                    event.id,
                    event.type,
                    event.status,
                    event.created_at,
                    event.attempt_count,
                )
                for event in events
            ),
        )
        if not rows:
            return format_html("<p>{}</p>", "No events yet.")
        return format_html(
            "<table><thead><tr><th>event</th><th>type</th><th>status</th><th>created</th>"
            "<th>attempts</th></tr></thead><tbody>{}</tbody></table>",
            rows,
        )

    def get_urls(self) -> list[URLPattern]:
        rotate = path(
            "<path:object_id>/rotate-signing-secret/",
            self.admin_site.admin_view(require_POST(self.rotate_view)),
            name="bots_bot_rotate_signing_secret",
        )
        return [rotate, *super().get_urls()]

    def rotate_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        bot = self.get_object(request, unquote(object_id))
        if bot is None or not self.has_change_permission(request, bot):
            raise Http404("No such bot")
        self._rotate(request, [bot])
        return HttpResponseRedirect(reverse("admin:bots_bot_change", args=[bot.pk]))

    @admin.action(
        description="Rotate the webhook signing secret (the old one signs too for a while)",
        permissions=["change"],
    )
    def rotate_signing_secret(self, request: HttpRequest, queryset: QuerySet[Bot]) -> None:
        self._rotate(request, list(queryset.select_related("workspace")))

    def _rotate(self, request: HttpRequest, bots: list[Bot]) -> None:
        actor = actor_of(request)
        for bot in bots:
            bot_signing_secret_rotate(bot=bot, actor=actor)
        self.message_user(
            request,
            f"Rotated the signing secret of {len(bots)} bot(s). Deliveries carry a "
            "signature with the previous secret too until the time shown on each bot.",
            messages.SUCCESS,
        )


@admin.register(Integration)
class IntegrationAdmin(admin.ModelAdmin):
    """The platform's catalog: Django's permissions decide, as for accounts."""

    list_display = ["name", "version", "title", "id", "created_at"]
    search_fields = ["name", "title", "=id"]
    readonly_fields = ["id", "created_at"]
    list_per_page = 50


@admin.register(IntegrationInstallation)
class IntegrationInstallationAdmin(WorkspaceScoped, admin.ModelAdmin):
    workspace_path = "bot__workspace"
    list_display = ["alias", "integration", "bot", "enabled", "created_at"]
    list_filter = ["enabled", "created_at"]
    search_fields = ["alias", "=bot__id", "bot__name", "integration__name"]
    list_select_related = ["integration", "bot"]
    list_per_page = 50
    raw_id_fields = ["bot"]


@admin.register(Workflow)
class WorkflowAdmin(WorkspaceScoped, admin.ModelAdmin):
    workspace_path = "bot__workspace"
    list_display = ["name", "id", "bot", "status", "created_at"]
    list_filter = ["status", "created_at"]
    search_fields = ["name", "=id", "=bot__id"]
    list_select_related = ["bot"]
    list_per_page = 50
    readonly_fields = ["id", "created_at", "updated_at"]
    raw_id_fields = ["bot", "conversation", "user"]
