"""Who makes a change: the services take an Actor, which their audit
records name; a request's actor is the token's account or the admin's user."""

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User as Account
from django.core.exceptions import ValidationError
from django.core.validators import validate_ipv46_address
from django.http import HttpRequest


@dataclass(frozen=True)
class Actor:
    """Who makes a change, and from where. `account` is None for the
    platform itself (a management command, a migration)."""

    account: Account | None = None
    client_ip: str | None = None

    @property
    def label(self) -> str:
        if self.account is None:
            return "platform"
        return self.account.email or self.account.get_username()


PLATFORM = Actor()


def client_ip(request: HttpRequest) -> str | None:
    """The peer's address. Behind a proxy it is the proxy's, unless the proxy
    (or a middleware configured for it) sets REMOTE_ADDR: forwarded headers
    are anybody's to forge, so they are not read here."""
    address = request.META.get("REMOTE_ADDR") or ""
    try:
        validate_ipv46_address(address)
    except ValidationError:
        return None
    return address


def actor_of(request: HttpRequest, account: Any = None) -> Actor:
    """The actor of a request: `account` when given (a token's), else the
    signed-in user of the Django admin."""
    who = account if account is not None else getattr(request, "user", None)
    if who is None or not getattr(who, "is_authenticated", False):
        who = None
    return Actor(account=who, client_ip=client_ip(request))
