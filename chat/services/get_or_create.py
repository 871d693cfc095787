"""How the runtime API's get-or-creates of a bot's users and conversations
find what they answer, and take turns so that two never both make it."""

from collections.abc import Callable
from typing import TypeVar

from django.db.models import Model, QuerySet

from bots.models import Bot
from bots.selectors.references import integration_reference_get
from platform_site.foundation.tags import TagMatch

ModelT = TypeVar("ModelT", bound=Model)


def tagged_get_or_create(
    *,
    bot: Bot,
    candidates: QuerySet[ModelT],
    match: TagMatch,
    integration_name: str | None,
    create: Callable[[], ModelT],
) -> tuple[ModelT, bool]:
    """The first of the bot's `candidates` whose tags `match`, as it is, else
    what `create` makes; and whether it was made. To be called in a
    transaction: the bot's row stays locked until it ends."""
    _bot_lock(bot)
    found = match.first(candidates)
    if found is None:
        return create(), True
    # An integration that is not installed is refused, found or not.
    integration_reference_get(bot_id=bot.id, name=integration_name)
    return found, False


def _bot_lock(bot: Bot) -> None:
    """Hold the bot's row until the transaction ends: a get-or-create that
    takes it first looks, then makes, so two of them never both make the
    object. FOR NO KEY UPDATE, so that rows referring to the bot (its
    messages, events) are still written meanwhile: their foreign key checks
    wait only for FOR UPDATE. (On SQLite, transactions that write take
    turns already: they begin IMMEDIATE.)"""
    Bot.objects.select_for_update(no_key=True).filter(pk=bot.pk).exists()
