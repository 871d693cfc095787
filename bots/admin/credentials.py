"""Model admins whose saves and deletions change what cached credentials
stand for (platform_site/foundation/credential_cache.py): every process forgets its answers once
the change commits. Admins that go through a service (tokens, members, bots)
need not: the service says so itself."""

from typing import Any

from django.contrib import admin
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from platform_site.foundation.credential_invalidation import credentials_changed


class ForgetsCredentials(admin.ModelAdmin):
    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if change:  # a new row was in no answer
            credentials_changed()

    def delete_model(self, request: HttpRequest, obj: Model) -> None:
        super().delete_model(request, obj)
        credentials_changed()

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        super().delete_queryset(request, queryset)
        credentials_changed()
