from typing import Any

from bots.models import Bot
from platform_site.api.fields import format_timestamp


def bot_summary_json(bot: Bot) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": bot.id,
        "createdAt": format_timestamp(bot.created_at),
        "updatedAt": format_timestamp(bot.updated_at),
        "name": bot.name,
        "tags": bot.tags,
    }
    if bot.deployed_at is not None:
        body["deployedAt"] = format_timestamp(bot.deployed_at)
    return body
