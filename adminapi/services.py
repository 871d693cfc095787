from collections.abc import Mapping

from bots.models import Bot, Workspace
from platform_site.api.pagination import Page, PageRequest, paginate
from platform_site.api.tags import tagged

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
