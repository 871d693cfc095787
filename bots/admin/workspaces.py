"""Workspaces in the admin: members, settings and bots inline, and what the
workspace uses. Superusers make workspaces (through workspace_create, with
their owner); owners and administrators manage theirs."""

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Count, Q
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from bots.actors import actor_of
from bots.admin.credentials import ForgetsCredentials
from bots.admin.members import MemberInline
from bots.admin.saved import RequestFormSetMixin, ServiceFormSet, adopt, marked_for_deletion
from bots.admin.scoping import WorkspaceScoped
from bots.models import Bot, Workspace, WorkspaceSettings
from bots.services.bots import BOT_UPDATABLE_FIELDS, bot_create, bot_delete, bot_update
from bots.services.members import account_for_email
from bots.services.workspace_settings import SETTINGS_FIELDS, workspace_settings_update
from bots.services.workspaces import workspace_create
from platform_site.foundation.ids import id_floor


def workspace_usage(workspace: Workspace) -> dict[str, int]:
    """What the workspace holds, one relation per query: joining several
    relations in one query would multiply their rows."""
    rows = Workspace.objects.filter(pk=workspace.pk)
    midnight = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    # By id, over the (bot, id) index: a filter on created_at would read
    # every event of the workspace.
    today = Q(bots__events__id__gte=id_floor("evt", midnight))
    return {
        "bots": rows.aggregate(n=Count("bots"))["n"],
        "events created today": rows.aggregate(n=Count("bots__events", filter=today))["n"],
        "files": rows.aggregate(n=Count("bots__files"))["n"],
        "passages": rows.aggregate(n=Count("bots__files__passages"))["n"],
    }


class SettingsFormSet(ServiceFormSet, BaseInlineFormSet):
    def save(self, commit: bool = True) -> list[Any]:
        new, changed = [], []
        for form in self.forms:
            if not form.has_changed() or not hasattr(form, "cleaned_data"):
                continue
            adding = form.instance._state.adding
            record = workspace_settings_update(record=form.instance, actor=actor_of(self.request))
            if adding:
                new.append(record)
            else:
                changed.append((record, form.changed_data))
        return self.record(new, changed, [])


class SettingsInline(RequestFormSetMixin, WorkspaceScoped, admin.StackedInline):
    model = WorkspaceSettings
    formset = SettingsFormSet
    fields = list(SETTINGS_FIELDS)
    can_delete = False
    verbose_name_plural = "settings"


class BotFormSet(ServiceFormSet, BaseInlineFormSet):
    def save(self, commit: bool = True) -> list[Any]:
        actor = actor_of(self.request)
        new, changed, deleted = [], [], []
        for form in self.forms:
            if not hasattr(form, "cleaned_data"):
                continue
            bot = form.instance
            if marked_for_deletion(form):
                if bot.pk is not None and not bot._state.adding:
                    bot_delete(
                        bot=Bot.objects.select_related("workspace").get(pk=bot.pk), actor=actor
                    )
                    deleted.append(bot)
            elif bot._state.adding:
                if form.has_changed():
                    fields = {name: getattr(bot, name) for name in BOT_UPDATABLE_FIELDS}
                    new.append(bot_create(workspace=self.instance, actor=actor, **fields))
            elif form.has_changed():
                edits = {name: getattr(bot, name) for name in form.changed_data}
                stored = Bot.objects.select_related("workspace").get(pk=bot.pk)
                changed.append((bot_update(bot=stored, actor=actor, **edits), form.changed_data))
        return self.record(new, changed, deleted)


class BotInline(RequestFormSetMixin, WorkspaceScoped, admin.TabularInline):
    model = Bot
    formset = BotFormSet
    extra = 0
    fields = ["name", "dev", "webhook_url", "deployed_at"]
    readonly_fields = ["deployed_at"]
    show_change_link = True


class WorkspaceAddForm(forms.ModelForm):
    owner = forms.EmailField(
        label="Owner's e-mail",
        help_text="The first owner. An account with this address is made if there is none.",
    )

    class Meta:
        model = Workspace
        fields = ["name"]


@admin.register(Workspace)
class WorkspaceAdmin(ForgetsCredentials, WorkspaceScoped, admin.ModelAdmin):
    workspace_path = "pk"
    list_display = ["name", "id", "created_at", "updated_at"]
    list_filter = ["created_at"]
    search_fields = ["name", "=id"]
    list_per_page = 50

    def get_fields(self, request: HttpRequest, obj: Workspace | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("name", "owner")
        return ("id", "name", "usage", "created_at", "updated_at")

    def get_readonly_fields(self, request: HttpRequest, obj: Workspace | None = None) -> list[str]:
        return [] if obj is None else ["id", "usage", "created_at", "updated_at"]

    def get_form(
        self,
        request: HttpRequest,
        obj: Workspace | None = None,
        change: bool = False,
        **kwargs: Any,
    ) -> Any:
        if obj is None:
            kwargs["form"] = WorkspaceAddForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_inlines(self, request: HttpRequest, obj: Workspace | None) -> list[Any]:
        # A new workspace gets its owner and settings from workspace_create.
        return [] if obj is None else [MemberInline, SettingsInline, BotInline]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_superuser

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_superuser

    def save_model(self, request: HttpRequest, obj: Workspace, form: Any, change: bool) -> None:
        if change:
            obj.save()
            return
        owner = account_for_email(form.cleaned_data["owner"])
        adopt(obj, workspace_create(name=obj.name, owner=owner, actor=actor_of(request)))

    @admin.display(description="usage")
    def usage(self, workspace: Workspace) -> SafeString:
        return format_html(
            "<ul>{}</ul>",
            format_html_join(
                "", "<li>{}: {}</li>", ((k, v) for k, v in workspace_usage(workspace).items())
            ),
        )


@admin.register(WorkspaceSettings)
class WorkspaceSettingsAdmin(WorkspaceScoped, admin.ModelAdmin):
    list_display = ["workspace", *SETTINGS_FIELDS, "updated_at"]
    search_fields = ["workspace__name", "=workspace__id", "display_name"]
    list_select_related = ["workspace"]
    list_per_page = 50
    fields = ["workspace", *SETTINGS_FIELDS, "updated_at"]
    readonly_fields = ["workspace", "updated_at"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Made with its workspace.
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(
        self, request: HttpRequest, obj: WorkspaceSettings, form: Any, change: bool
    ) -> None:
        workspace_settings_update(record=obj, actor=actor_of(request))
