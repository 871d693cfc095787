"""What a bearer token stands for, in one round trip to the database, or
none when this process read it a moment ago (platform_site/foundation/credential_cache.py).

Every runtime and admin request starts here, so the token, its account's
state and the account's role in the target workspace come back from a single
query instead of three ORM queries; the bot and workspace arrive as instances
holding only their ids (any other field loads on first use). A kept answer is
plain values: each request builds its own instances from it, and checks the
token's expiry again."""

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Model

from bots.models import AccessToken, Bot, Membership, Workspace
from bots.token_checks import token_check_usable, token_digest
from platform_site.api.principals import BotPrincipal, WorkspacePrincipal
from platform_site.foundation.credential_cache import CredentialCache

_TOKEN_FIELDS = tuple(field.attname for field in AccessToken._meta.concrete_fields)
_LAST_USED = _TOKEN_FIELDS.index("last_used_at")


@dataclass(frozen=True)
class Grant:
    """What a live token of an active account may do in one workspace (at one
    bot, for a bot's lookup), as the database said when it was read."""

    role: str
    workspace_id: str
    bot_id: str | None = None
    # The AccessToken's columns in _TOKEN_FIELDS order, once it passed its checks.
    token_values: tuple[Any, ...] = ()


# Keyed by (token digest, bot or workspace id).
bot_grants: CredentialCache[Grant] = CredentialCache("bot tokens")
workspace_grants: CredentialCache[Grant] = CredentialCache("workspace tokens")


def _table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


@cache
def _bot_sql() -> str:
    return f"""
        SELECT t.*, a.is_active AS account_is_active, b.id AS bot_pk,
               b.workspace_id AS bot_workspace_id, m.role AS member_role
        FROM {_table(AccessToken)} t
        JOIN {_table(get_user_model())} a ON a.id = t.account_id
        LEFT JOIN {_table(Bot)} b ON b.id = %s
        LEFT JOIN {_table(Membership)} m
               ON m.workspace_id = b.workspace_id AND m.account_id = t.account_id
        WHERE t.token_hash = %s
    """


@cache
def _workspace_sql() -> str:
    return f"""
        SELECT t.*, a.is_active AS account_is_active, m.workspace_id AS member_workspace_id,
               m.role AS member_role
        FROM {_table(AccessToken)} t
        JOIN {_table(get_user_model())} a ON a.id = t.account_id
        LEFT JOIN {_table(Membership)} m ON m.account_id = t.account_id AND m.workspace_id = %s
        WHERE t.token_hash = %s
    """


def _token_of(values: tuple[Any, ...]) -> AccessToken:
    return AccessToken.from_db(connection.alias, _TOKEN_FIELDS, values)


def _token_values(token: AccessToken) -> tuple[Any, ...]:
    return tuple(getattr(token, name) for name in _TOKEN_FIELDS)


# Reads a token by digest, with what it may do in the lookup's scope.
_Read = Callable[[str], tuple[AccessToken | None, Grant | None]]


def _grant(
    *, raw: str, scope_id: str, grants: CredentialCache[Grant], read: _Read
) -> tuple[AccessToken, Grant | None]:
    """The usable token `raw` names and what it may do in the scope (None: not
    a member there); InvalidToken when it is not usable, as token_check_usable says."""
    digest = token_digest(raw)
    key = (digest, scope_id)
    grant = grants.get(key)
    if grant is not None:
        token = _token_of(grant.token_values)
        token_check_usable(token=token, digest=digest, account_is_active=True)
        if token.last_used_at != grant.token_values[_LAST_USED]:
            # Its use was recorded: the next requests need not try again.
            grants.replace(key, grant, replace(grant, token_values=_token_values(token)))
    else:
        fetch = grants.fetch()
        found, grant = read(digest)
        token_check_usable(
            token=found,
            digest=digest,
            account_is_active=bool(getattr(found, "account_is_active", 0)),
        )
        assert found is not None
        token = found
        if grant is not None:
            # As checked, with its use recorded.
            grant = replace(grant, token_values=_token_values(token))
            grants.put(fetch, key, grant)
    token.account = get_user_model().from_db(
        connection.alias, ["id", "is_active"], [token.account_id, True]
    )
    return token, grant


def credentials_for_bot(*, raw: str, bot_id: str) -> BotPrincipal | None:
    """Who the token speaks for at a bot; None when its account is not a
    member of the bot's workspace (or there is no such bot)."""

    def read(digest: str) -> tuple[AccessToken | None, Grant | None]:
        token = next(iter(AccessToken.objects.raw(_bot_sql(), [bot_id, digest])), None)
        role = getattr(token, "member_role", None)
        if token is None or role is None:
            return token, None
        workspace_id = token.bot_workspace_id  # type: ignore[attr-defined]
        return token, Grant(role, workspace_id, token.bot_pk)  # type: ignore[attr-defined]

    token, grant = _grant(raw=raw, scope_id=bot_id, grants=bot_grants, read=read)
    if grant is None:
        return None
    workspace = Workspace.from_db(connection.alias, ["id"], [grant.workspace_id])
    bot = Bot.from_db(connection.alias, ["id", "workspace_id"], [grant.bot_id, grant.workspace_id])
    bot.workspace = workspace
    return BotPrincipal(token=token, workspace=workspace, role=grant.role, bot=bot)


def credentials_for_workspace(*, raw: str, workspace_id: str) -> WorkspacePrincipal | None:
    """Who the token speaks for in a workspace; None when its account is not
    a member of it (or there is no such workspace)."""

    def read(digest: str) -> tuple[AccessToken | None, Grant | None]:
        token = next(iter(AccessToken.objects.raw(_workspace_sql(), [workspace_id, digest])), None)
        role = getattr(token, "member_role", None)
        if token is None or role is None:
            return token, None
        return token, Grant(role, token.member_workspace_id)  # type: ignore[attr-defined]

    token, grant = _grant(raw=raw, scope_id=workspace_id, grants=workspace_grants, read=read)
    if grant is None:
        return None
    workspace = Workspace.from_db(connection.alias, ["id"], [grant.workspace_id])
    return WorkspacePrincipal(token=token, workspace=workspace, role=grant.role)
