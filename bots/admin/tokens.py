"""Access tokens in the admin: made for an account through
access_token_create (the raw value shown once, on the next page), revoked
through access_token_revoke; only their rate limit ceiling is ever edited, by
a superuser (access_token_rate_limit_change)."""

from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User as Account
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from bots.actors import actor_of
from bots.admin.saved import adopt
from bots.admin.scoping import WorkspaceScoped, managed_workspaces
from bots.models import AccessToken, Membership
from bots.services.tokens import (
    access_token_create,
    access_token_rate_limit_change,
    access_token_revoke,
)

# Ten years: past that, "never" says it better.
TOKEN_DAYS_MAX = 3650
NO_SUCH_ACCOUNT = "No account you manage has this e-mail address."


# The raw token reaches the next page in a short-lived signed cookie of the
# browser that made it, never in the session: session rows live in the
# database, where a token's raw value must never be, even briefly.
RAW_TOKEN_COOKIE_SECONDS = 120
_RAW_TOKEN_SALT = "bots.admin.raw_token"


def _raw_token_cookie(token_id: int) -> str:
    return f"raw_token_{token_id}"


def token_accounts(request: HttpRequest) -> QuerySet[Account]:
    """The accounts whose tokens the signed-in account manages: members of its
    workspaces, and itself."""
    accounts = get_user_model().objects.all()
    workspaces = managed_workspaces(request)
    if workspaces is None:
        return accounts
    members = Membership.objects.filter(workspace_id__in=list(workspaces)).values("account_id")
    return accounts.filter(Q(pk__in=members) | Q(pk=request.user.pk))


class TokenCreateForm(forms.ModelForm):
    request: HttpRequest

    email = forms.EmailField(label="Account's e-mail")
    expires_in_days = forms.IntegerField(
        label="Expires in (days)",
        required=False,
        min_value=1,
        max_value=TOKEN_DAYS_MAX,
        help_text="Leave empty for a token that does not expire.",
    )

    class Meta:
        model = AccessToken
        fields = ["name"]

    def clean_email(self) -> Account:
        email = self.cleaned_data["email"]
        account = token_accounts(self.request).filter(email__iexact=email).order_by("pk").first()
        if account is None:
            raise forms.ValidationError(NO_SUCH_ACCOUNT)
        return account


class RevokedFilter(admin.SimpleListFilter):
    title = "revoked"
    parameter_name = "revoked"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Yes"), ("no", "No")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "yes":
            return queryset.filter(revoked_at__isnull=False)
        if self.value() == "no":
            return queryset.filter(revoked_at__isnull=True)
        return queryset


class ExpiredFilter(admin.SimpleListFilter):
    title = "expired"
    parameter_name = "expired"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Yes"), ("no", "No")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        expired = Q(expires_at__lte=timezone.now())
        if self.value() == "yes":
            return queryset.filter(expired)
        if self.value() == "no":
            return queryset.exclude(expired)
        return queryset


@admin.register(AccessToken)
class AccessTokenAdmin(WorkspaceScoped, admin.ModelAdmin):
    list_display = [
        "prefix",
        "name",
        "account",
        "created_at",
        "expires_at",
        "revoked_at",
        "last_used_at",
    ]
    list_filter = [RevokedFilter, ExpiredFilter, "created_at"]
    search_fields = ["prefix", "name", "account__email", "account__username"]
    list_select_related = ["account"]
    list_per_page = 50
    actions = ["revoke_selected"]

    def scope(self, queryset: QuerySet[Any], request: HttpRequest) -> QuerySet[Any]:
        if managed_workspaces(request) is None:
            return queryset
        return queryset.filter(account__in=token_accounts(request))

    def get_fields(self, request: HttpRequest, obj: AccessToken | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("email", "name", "expires_in_days")
        return (
            "account",
            "name",
            "prefix",
            "created_at",
            "expires_at",
            "revoked_at",
            "last_used_at",
            "rate_limit_per_minute",
        )

    def get_readonly_fields(
        self, request: HttpRequest, obj: AccessToken | None = None
    ) -> tuple[str, ...]:
        if obj is None:
            return ()
        # A token's ceiling is the one thing that changes on its page.
        return tuple(
            name for name in self.get_fields(request, obj) if name != "rate_limit_per_minute"
        )

    def get_form(
        self,
        request: HttpRequest,
        obj: AccessToken | None = None,
        change: bool = False,
        **kwargs: Any,
    ) -> Any:
        if obj is None:
            kwargs["form"] = TokenCreateForm
        form = super().get_form(request, obj, change=change, **kwargs)
        return type(form.__name__, (form,), {"request": request})

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Revocation has its own action and button; a token's ceiling holds
        # across every workspace, so only a superuser sets it.
        return bool(request.user.is_superuser)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A revoked token stays, as the record of what it was.
        return False

    def has_revoke_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_view_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: AccessToken, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if change:
            access_token_rate_limit_change(
                token=obj,
                rate_limit_per_minute=data["rate_limit_per_minute"],
                actor=actor_of(request),
            )
            return
        token, raw = access_token_create(
            account=data["email"],
            name=data["name"],
            expires_in_days=data["expires_in_days"],
            actor=actor_of(request),
        )
        adopt(obj, token)
        request.raw_token = raw  # type: ignore[attr-defined]  # for response_add

    def response_add(
        self, request: HttpRequest, obj: AccessToken, post_url_continue: str | None = None
    ) -> HttpResponse:
        self.message_user(request, f"Token {obj.prefix}… made for {obj.account}.", messages.SUCCESS)
        page = reverse("admin:bots_accesstoken_change", args=[obj.pk])
        response = HttpResponseRedirect(page)
        # Shown once, by the next page, which drops it.
        response.set_signed_cookie(
            _raw_token_cookie(obj.pk),
            request.raw_token,  # type: ignore[attr-defined]
            salt=_RAW_TOKEN_SALT,
            max_age=RAW_TOKEN_COOKIE_SECONDS,
            path=page,
            secure=request.is_secure(),
            httponly=True,
            samesite="Strict",
        )
        return response

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        context = dict(extra_context or {})
        token = self.get_object(request, unquote(object_id))
        if token is None:
            return super().change_view(request, object_id, form_url, context)
        cookie = _raw_token_cookie(token.pk)
        context["raw_token"] = request.get_signed_cookie(
            cookie, default=None, salt=_RAW_TOKEN_SALT, max_age=RAW_TOKEN_COOKIE_SECONDS
        )
        context["has_revoke_permission"] = token.revoked_at is None and (
            self.has_revoke_permission(request, token)
        )
        response = super().change_view(request, object_id, form_url, context)
        if context["raw_token"] is not None:
            response.delete_cookie(cookie, path=request.path, samesite="Strict")
        return response

    def get_urls(self) -> list[URLPattern]:
        revoke = path(
            "<path:object_id>/revoke/",
            self.admin_site.admin_view(require_POST(self.revoke_view)),
            name="bots_accesstoken_revoke",
        )
        return [revoke, *super().get_urls()]

    def revoke_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        token = self.get_object(request, unquote(object_id))
        if token is None or not self.has_revoke_permission(request, token):
            raise Http404("No such token")
        self._revoke(request, [token])
        return HttpResponseRedirect(reverse("admin:bots_accesstoken_change", args=[token.pk]))

    @admin.action(description="Revoke selected tokens", permissions=["revoke"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[AccessToken]) -> None:
        self._revoke(request, list(queryset.select_related("account")))

    def _revoke(self, request: HttpRequest, tokens: list[AccessToken]) -> None:
        actor = actor_of(request)
        already: list[datetime | None] = [token.revoked_at for token in tokens]
        for token in tokens:
            access_token_revoke(token=token, actor=actor)
        revoked = already.count(None)
        self.message_user(
            request,
            f"{revoked} token(s) revoked; {len(tokens) - revoked} already were.",
            messages.SUCCESS,
        )
