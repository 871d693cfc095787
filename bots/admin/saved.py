"""Admin saves that go through a service: the admin keeps working with the
object its form built, so that object takes on what the service saved."""

from typing import Any

from django.db import models
from django.forms import BaseModelFormSet
from django.http import HttpRequest


def adopt(target: models.Model, saved: models.Model) -> None:
    for field in saved._meta.concrete_fields:
        setattr(target, field.attname, getattr(saved, field.attname))
    target._state.adding = False
    target._state.db = saved._state.db


def marked_for_deletion(form: Any) -> bool:
    """A formset's form whose row the person ticked for deletion."""
    return bool(form.cleaned_data.get("DELETE"))


class RequestFormSetMixin:
    """Hands the request to an inline's formset, whose save calls services
    with the request's actor."""

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)  # type: ignore[misc]
        return type(formset.__name__, (formset,), {"request": request})


class ServiceFormSet(BaseModelFormSet):
    """What Django's change message reads after a formset saved."""

    request: HttpRequest

    def record(
        self,
        new: list[Any],
        changed: list[tuple[Any, list[str]]],
        deleted: list[Any],
    ) -> list[Any]:
        self.new_objects = new
        self.changed_objects = changed
        self.deleted_objects = deleted
        return new
