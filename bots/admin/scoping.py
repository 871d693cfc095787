"""Which rows a staff account sees in the Django admin.

A superuser sees everything. Any other active staff account sees the
workspaces where it is an owner or administrator, and what belongs to them:
that membership is its permission, no Django model permission is needed (or
enough) for these models."""

from typing import Any

from django.contrib import admin
from django.contrib.admin.exceptions import NotRegistered
from django.db import models
from django.db.models import QuerySet
from django.forms import ModelChoiceField
from django.http import HttpRequest

from bots.models import Membership, Role

MANAGING_ROLES = (Role.OWNER, Role.ADMINISTRATOR)
_CACHE_ATTRIBUTE = "_admin_managed_workspaces"


def managed_workspaces(request: HttpRequest) -> dict[str, str] | None:
    """{workspace id: role} of the workspaces the signed-in account manages;
    None for a superuser, who manages them all. Read once per request."""
    user = request.user
    if user.is_superuser:
        return None
    cached: dict[str, str] | None = getattr(request, _CACHE_ATTRIBUTE, None)
    if cached is None:
        rows = Membership.objects.filter(
            account_id=user.pk, role__in=MANAGING_ROLES, account__is_active=True
        ).values_list("workspace_id", "role")
        cached = dict(rows)
        setattr(request, _CACHE_ATTRIBUTE, cached)
    return cached


def manages_any(request: HttpRequest) -> bool:
    workspaces = managed_workspaces(request)
    return workspaces is None or bool(workspaces)


def acting_role(request: HttpRequest, workspace_id: str) -> str | None:
    """The role the member services check owner rules against: None for a
    superuser (no restriction), else the account's role in that workspace."""
    workspaces = managed_workspaces(request)
    return None if workspaces is None else workspaces.get(workspace_id)


class ReadOnlyAdminMixin:
    """Rows the engine writes: staff read them, never edit them by hand."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class WorkspaceScoped(admin.options.BaseModelAdmin):
    """Limits a model admin (or inline) to the rows of the workspaces the
    account manages: its lists, the objects it opens, and the choices its
    forms offer for other scoped models.

    `workspace_path` is the lookup from the model to its workspace's id."""

    workspace_path: str = "workspace"
    # A URL typed without a scheme means https (Django 6's default, chosen now).
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    def scope(self, queryset: QuerySet[Any], request: HttpRequest) -> QuerySet[Any]:
        workspaces = managed_workspaces(request)
        if workspaces is None:
            return queryset
        return queryset.filter(**{f"{self.workspace_path}__in": list(workspaces)})

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return self.scope(super().get_queryset(request), request)

    def _allows(self, request: HttpRequest, obj: Any) -> bool:
        if not manages_any(request):
            return False
        if obj is None or request.user.is_superuser or not isinstance(obj, self.model):
            # No object, or (in an inline) the parent, which its own admin scoped.
            return True
        return self.scope(self.model._default_manager.filter(pk=obj.pk), request).exists()

    def has_module_permission(self, request: HttpRequest) -> bool:
        return manages_any(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._allows(request, obj)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return manages_any(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._allows(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._allows(request, obj)

    def formfield_for_foreignkey(
        self, db_field: models.ForeignKey[Any, Any], request: HttpRequest, **kwargs: Any
    ) -> "ModelChoiceField[Any] | None":
        related = db_field.remote_field.model
        try:
            related_admin = self.admin_site.get_model_admin(related)
        except NotRegistered:
            related_admin = None
        if isinstance(related_admin, WorkspaceScoped) and "queryset" not in kwargs:
            # Validation uses this queryset too: another workspace's row is
            # neither offered nor accepted, whatever the widget.
            choices = related._default_manager.all()
            ordering = related_admin.get_ordering(request)
            if ordering:
                choices = choices.order_by(*ordering)
            kwargs["queryset"] = related_admin.scope(choices, request)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)
