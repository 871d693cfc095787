"""The rate limits a workspace's settings set, as every request needs them:
kept per process like credentials (platform_site/foundation/credential_cache.py), so a change
staff make reaches every process as soon as it commits (at most a second
later without the invalidation subscriber)."""

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Model

from bots.models import AccessToken, Bot, Workspace
from bots.models.workspace_settings import (
    default_chat_address_rate_limit,
    default_chat_address_user_creation_rate_limit,
    default_chat_user_creation_rate_limit,
    default_chat_user_rate_limit,
    default_rate_limit,
)
from platform_site.api.rate_limit import Policy
from platform_site.foundation.credential_cache import CredentialCache


@dataclass(frozen=True)
class WorkspaceLimits:
    workspace_id: str
    per_minute: int
    chat_user_per_minute: int
    chat_address_per_minute: int
    # Chat users made: from one address a minute; for each bot an hour.
    chat_address_user_creations_per_minute: int
    chat_user_creations_per_hour: int


_DEFAULTS = (
    default_rate_limit,
    default_chat_user_rate_limit,
    default_chat_address_rate_limit,
    default_chat_address_user_creation_rate_limit,
    default_chat_user_creation_rate_limit,
)

# Keyed by (model, id): what the lookup reads by.
_limits: CredentialCache[WorkspaceLimits] = CredentialCache("rate limits")


def _lookup(model: type[Model], pk: str, workspace_path: str) -> WorkspaceLimits | None:
    key = (model.__name__, pk)
    limits = _limits.get(key)
    if limits is None:
        fetch = _limits.fetch()
        settings_path = f"{workspace_path}settings__"
        row = (
            model._default_manager.filter(pk=pk)
            .values_list(
                f"{workspace_path}id",
                f"{settings_path}rate_limit_per_minute",
                f"{settings_path}chat_user_rate_limit_per_minute",
                f"{settings_path}chat_address_rate_limit_per_minute",
                f"{settings_path}chat_address_user_creation_rate_limit_per_minute",
                f"{settings_path}chat_user_creation_rate_limit_per_hour",
            )
            .first()
        )
        if row is None:
            return None
        workspace_id, *values = row
        # A workspace made before its settings has the defaults.
        limits = WorkspaceLimits(
            workspace_id,
            *(
                default() if value is None else value
                for value, default in zip(values, _DEFAULTS, strict=True)
            ),
        )
        _limits.put(fetch, key, limits)
    return limits


def workspace_rate_limits(workspace_id: str) -> WorkspaceLimits | None:
    """The limits of a workspace; None when there is no such workspace."""
    return _lookup(Workspace, workspace_id, "")


def bot_rate_limits(bot_id: str) -> WorkspaceLimits | None:
    """The limits of a bot's workspace; None when there is no such bot."""
    return _lookup(Bot, bot_id, "workspace__")


def workspace_policy(limits: WorkspaceLimits) -> Policy:
    """The workspace's limit: its tokens' requests and its files' signed URLs together."""
    return Policy("workspace", f"workspace:{limits.workspace_id}", limits.per_minute)


def token_rate_limit(token: AccessToken) -> int:
    return token.rate_limit_per_minute or settings.TOKEN_RATE_LIMIT_PER_MINUTE
