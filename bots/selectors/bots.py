"""Reading a workspace's bots."""

from collections.abc import Mapping

from django.db.models import Prefetch

from bots.models import Bot, IntegrationInstallation, Workspace
from platform_site.foundation.lookups import object_get
from platform_site.foundation.pagination import Page, PageRequest, paginate
from platform_site.foundation.tags import tagged

# Ids are ULIDs, so id order is creation order: one unique column serves createdAt.
_ORDERINGS = {"createdAt": ["id"], "updatedAt": ["updated_at", "id"]}


def bots_list(
    *,
    workspace: Workspace,
    page: PageRequest,
    dev: bool | None = None,
    tags: Mapping[str, str] | None = None,
    sort_field: str = "createdAt",
    sort_direction: str = "desc",
) -> Page[Bot]:
    bots = Bot.objects.filter(workspace=workspace)
    if dev is not None:
        bots = bots.filter(dev=dev)
    bots = tagged(bots, tags or {})
    sign = "-" if sort_direction == "desc" else ""
    return paginate(
        bots,
        ordering=[f"{sign}{name}" for name in _ORDERINGS[sort_field]],
        # The filters name the list too: a token of a filtered list is no
        # position in another.
        list_name=f"bots:{workspace.id}:dev={dev}:tags={sorted((tags or {}).items())}",
        request=page,
    )


def bot_get(*, workspace: Workspace, bot_id: str, with_integrations: bool = False) -> Bot:
    """The workspace's bot `bot_id`; another workspace's is not found, as is none."""
    bots = Bot.objects.filter(workspace=workspace)
    if with_integrations:
        bots = bots.prefetch_related(
            Prefetch(
                "installations",
                queryset=IntegrationInstallation.objects.select_related("integration").order_by(
                    "alias"
                ),
            )
        )
    bot = object_get(bots, object_id=bot_id, prefix="bot", noun="bot")
    # The caller's workspace is the bot's: spare the audit record a query for it.
    bot.workspace = workspace
    return bot
