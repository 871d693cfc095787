"""Members in the admin: their own pages and the inline of a workspace. Every
change goes through bots.services.members, which writes the audit record and holds
the owner rules; a refusal shows as a form error."""

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from bots.actors import actor_of
from bots.admin.refusals import refusal
from bots.admin.saved import RequestFormSetMixin, ServiceFormSet, adopt, marked_for_deletion
from bots.admin.scoping import WorkspaceScoped, acting_role
from bots.models import Membership, Role, Workspace
from bots.services.members import account_for_email, member_add, member_remove, member_role_change
from platform_site.foundation.domain_errors import DomainError


def _fresh(membership_id: str) -> Membership:
    # A service run that was rolled back leaves its marks on the instance it
    # was given (a deleted one loses its pk): each run reads its own.
    return Membership.objects.select_related("account", "workspace").get(pk=membership_id)


class RequestForm(forms.ModelForm):
    request: HttpRequest

    def actor_and_role(self, workspace_id: str) -> dict[str, Any]:
        return {
            "actor": actor_of(self.request),
            "acting_role": acting_role(self.request, workspace_id),
        }


class MembershipAddForm(RequestForm):
    email = forms.EmailField(
        label="E-mail", help_text="An account with this address is made if there is none."
    )

    class Meta:
        model = Membership
        fields = ["workspace", "role"]

    def add(self) -> Membership:
        workspace: Workspace = self.cleaned_data["workspace"]
        return member_add(
            workspace=workspace,
            account=account_for_email(self.cleaned_data["email"]),
            role=self.cleaned_data["role"],
            **self.actor_and_role(workspace.pk),
        )

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        if not self.errors:
            refused = refusal(cleaned["workspace"].pk, self.add)
            if refused:
                raise ValidationError(refused)
        return cleaned


class MembershipRoleForm(RequestForm):
    class Meta:
        model = Membership
        fields = ["role"]

    def change_role(self) -> Membership:
        return member_role_change(
            membership=_fresh(self.instance.pk),
            role=self.cleaned_data["role"],
            **self.actor_and_role(self.instance.workspace_id),
        )

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        if not self.errors:
            refused = refusal(self.instance.workspace_id, self.change_role)
            if refused:
                raise ValidationError(refused)
        return cleaned


@admin.register(Membership)
class MembershipAdmin(WorkspaceScoped, admin.ModelAdmin):
    list_display = ["account", "workspace", "role", "created_at"]
    list_filter = ["role", ("workspace", admin.RelatedOnlyFieldListFilter), "created_at"]
    search_fields = ["account__email", "account__username", "workspace__name", "=workspace__id"]
    list_select_related = ["account", "workspace"]
    list_per_page = 50
    actions = ["remove_selected"]

    def get_fields(self, request: HttpRequest, obj: Membership | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("workspace", "email", "role")
        return ("account", "workspace", "role", "created_at", "updated_at")

    def get_readonly_fields(self, request: HttpRequest, obj: Membership | None = None) -> list[str]:
        return [] if obj is None else ["account", "workspace", "created_at", "updated_at"]

    def get_form(
        self,
        request: HttpRequest,
        obj: Membership | None = None,
        change: bool = False,
        **kwargs: Any,
    ) -> Any:
        kwargs["form"] = MembershipAddForm if obj is None else MembershipRoleForm
        form = super().get_form(request, obj, change=change, **kwargs)
        return type(form.__name__, (form,), {"request": request})

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        # Django's bulk delete would skip the owner rules and the audit records.
        actions.pop("delete_selected", None)
        return actions

    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        if change:
            form.change_role()
        else:
            adopt(obj, form.add())

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        member_remove(
            membership=obj,
            actor=actor_of(request),
            acting_role=acting_role(request, obj.workspace_id),
        )

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        try:
            return super().delete_view(request, object_id, extra_context)
        except DomainError as refused:
            # The view's transaction rolled back; say why, on the same page.
            self.message_user(request, refused.message, messages.ERROR)
            return HttpResponseRedirect(request.path)

    @admin.action(description="Remove selected members", permissions=["delete"])
    def remove_selected(self, request: HttpRequest, queryset: QuerySet[Membership]) -> None:
        removed = 0
        for membership in queryset.select_related("account", "workspace"):
            try:
                self.delete_model(request, membership)
                removed += 1
            except DomainError as refused:
                self.message_user(request, f"{membership}: {refused.message}", messages.ERROR)
        self.message_user(request, f"{removed} member(s) removed.", messages.SUCCESS)


class MemberInlineForm(forms.ModelForm):
    email = forms.EmailField(label="E-mail", required=False)

    class Meta:
        model = Membership
        fields = ["role"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Not the pk: a new membership has its id from the start.
        if not self.instance._state.adding:
            account = self.instance.account
            self.fields["email"].initial = account.email or account.get_username()
            self.fields["email"].disabled = True
        else:
            self.fields[
                "email"
            ].help_text = "An account with this address is made if there is none."

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        if self.instance._state.adding and not cleaned.get("email"):
            self.add_error("email", "Give the new member's e-mail address.")
        return cleaned


@dataclass(frozen=True)
class _Change:
    kind: str  # "add", "role" or "remove"
    form: Any
    run: Callable[[], Any]


class MemberFormSet(ServiceFormSet, BaseInlineFormSet):
    def _context(self) -> dict[str, Any]:
        return {
            "actor": actor_of(self.request),
            "acting_role": acting_role(self.request, self.instance.pk),
        }

    def _add(self, email: str, role: str) -> Membership:
        # The account is found or made inside the run, so a refused run makes none.
        account = account_for_email(email)
        return member_add(workspace=self.instance, account=account, role=role, **self._context())

    def _change_role(self, pk: str, role: str) -> Membership:
        return member_role_change(membership=_fresh(pk), role=role, **self._context())

    def _remove(self, pk: str) -> None:
        member_remove(membership=_fresh(pk), **self._context())

    def _changes(self) -> list[_Change]:
        """The forms' changes in an order that keeps an owner while they run:
        additions, role changes (promotions to owner first), removals."""
        adds: list[_Change] = []
        promotions: list[_Change] = []
        changes: list[_Change] = []
        removals: list[_Change] = []
        for form in self.forms:
            data = getattr(form, "cleaned_data", None)
            if not data:
                continue
            pk = form.instance.pk
            adding = form.instance._state.adding
            if marked_for_deletion(form):
                if not adding:
                    removals.append(_Change("remove", form, partial(self._remove, pk)))
            elif adding:
                if form.has_changed():
                    run = partial(self._add, data["email"], data["role"])
                    adds.append(_Change("add", form, run))
            elif "role" in form.changed_data:
                change = _Change("role", form, partial(self._change_role, pk, data["role"]))
                (promotions if data["role"] == Role.OWNER else changes).append(change)
        return [*adds, *promotions, *changes, *removals]

    def clean(self) -> None:
        super().clean()
        if any(form.errors for form in self.forms if not marked_for_deletion(form)):
            return
        changes = self._changes()
        refused = refusal(self.instance.pk, lambda: [change.run() for change in changes])
        if refused:
            raise ValidationError(refused)

    def save(self, commit: bool = True) -> list[Any]:
        new, changed, deleted = [], [], []
        for change in self._changes():
            result = change.run()
            if change.kind == "add":
                new.append(result)
            elif change.kind == "role":
                changed.append((result, ["role"]))
            else:
                deleted.append(change.form.instance)
        return self.record(new, changed, deleted)


class MemberInline(RequestFormSetMixin, WorkspaceScoped, admin.TabularInline):
    model = Membership
    form = MemberInlineForm
    formset = MemberFormSet
    fields = ["email", "role"]
    extra = 0

    def get_queryset(self, request: HttpRequest) -> QuerySet[Membership]:
        return super().get_queryset(request).select_related("account")
