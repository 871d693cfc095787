"""Idempotency keys in the admin: read only, and for superusers only. A key's
scope names its token and bot or workspace, or its chat connection, as text,
which gives no workspace to limit a staff account's view by."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from bots.admin.scoping import ReadOnlyAdminMixin
from bots.models import IdempotencyKey


@admin.register(IdempotencyKey)
class IdempotencyKeyAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["key", "scope", "status_code", "created_at", "expires_at"]
    list_filter = ["status_code", "created_at"]
    search_fields = ["=key", "^scope"]
    list_per_page = 50
    ordering = ["-id"]
    # Not the kept answer: that of POST /users holds a chat user's key.
    fields = readonly_fields = (
        "scope",
        "key",
        "fingerprint",
        "status_code",
        "response_headers",
        "created_at",
        "expires_at",
    )

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_superuser
