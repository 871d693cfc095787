"""What a bearer token stands for, in one round trip to the database.

Every runtime and admin request starts here, so the token, its account's
state and the account's role in the target workspace come back from a single
query instead of three ORM queries; the bot and workspace arrive as instances
holding only their ids (any other field loads on first use)."""

from functools import cache

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Model

from bots.models import AccessToken, Bot, Membership, Workspace
from bots.principals import BotPrincipal, WorkspacePrincipal
from bots.tokens import token_check_usable, token_digest


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


def _token(raw: str, sql: str, scope_id: str) -> AccessToken:
    digest = token_digest(raw)
    token = next(iter(AccessToken.objects.raw(sql, [scope_id, digest])), None)
    token_check_usable(
        token=token, digest=digest, account_is_active=bool(getattr(token, "account_is_active", 0))
    )
    assert token is not None
    token.account = get_user_model().from_db(
        connection.alias, ["id", "is_active"], [token.account_id, True]
    )
    return token


def credentials_for_bot(*, raw: str, bot_id: str) -> BotPrincipal | None:
    """Who the token speaks for at a bot; None when its account is not a
    member of the bot's workspace (or there is no such bot)."""
    token = _token(raw, _bot_sql(), bot_id)
    role = getattr(token, "member_role", None)
    if role is None:
        return None
    workspace_id = token.bot_workspace_id  # type: ignore[attr-defined]
    workspace = Workspace.from_db(connection.alias, ["id"], [workspace_id])
    bot = Bot.from_db(connection.alias, ["id", "workspace_id"], [token.bot_pk, workspace_id])  # type: ignore[attr-defined]
    bot.workspace = workspace
    return BotPrincipal(token=token, workspace=workspace, role=role, bot=bot)


def credentials_for_workspace(*, raw: str, workspace_id: str) -> WorkspacePrincipal | None:
    """Who the token speaks for in a workspace; None when its account is not
    a member of it (or there is no such workspace)."""
    token = _token(raw, _workspace_sql(), workspace_id)
    role = getattr(token, "member_role", None)
    if role is None:
        return None
    workspace = Workspace.from_db(connection.alias, ["id"], [token.member_workspace_id])  # type: ignore[attr-defined]
    return WorkspacePrincipal(token=token, workspace=workspace, role=role)
