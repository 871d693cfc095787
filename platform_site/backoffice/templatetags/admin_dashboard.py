"""{% admin_dashboard %}: the dashboard on the Django admin's home page
(admin/platform/index.html), for the workspaces the signed-in staff
account may see. A tag rather than another index view: the admin site stays
Django's own, on which every model admin is registered."""

from dataclasses import replace
from datetime import timedelta
from typing import Any

from django import template
from django.conf import settings
from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString

from bots.admin.scoping import managed_workspaces
from platform_site.backoffice.dashboard.charts import Bar, Series, bar_chart, line_chart
from platform_site.backoffice.dashboard.figures import Timeline, dashboard_figures

register = template.Library()

# Colours that tell apart on screen and in dark mode; the dashes, in print.
CREATED = Series("created", (), "#417690")
DELIVERED = Series("delivered", (), "#2e7d32", "7 4")
FAILED = Series("failed attempts", (), "#c62828", "2 3")
INDEXING_COLOUR = "#79aec8"
ANALYTICS_COLOUR = "#7b5ea7"


@register.inclusion_tag("admin/platform/dashboard.html", takes_context=True)
def admin_dashboard(context: template.Context) -> dict[str, Any]:
    workspaces = managed_workspaces(context["request"])
    figures = dashboard_figures(
        workspace_ids=None if workspaces is None else list(workspaces), now=timezone.now()
    )
    failing_bots = [
        {**vars(bot), "url": reverse("admin:bots_bot_change", args=[quote(bot.bot_id)])}
        for bot in figures.failing_bots
    ]
    return {
        "figures": figures,
        "platform_wide": workspaces is None,
        "workspace_count": None if workspaces is None else len(workspaces),
        "rollup_interval": settings.DASHBOARD_ROLLUP_INTERVAL,
        "hour_chart": _timeline_chart(
            figures.hour, "Events per minute, last hour", timedelta(minutes=10), True
        ),
        "day_chart": _timeline_chart(
            figures.day,
            "Events per minute, last day (15-minute averages)",
            timedelta(hours=3),
            False,
        ),
        "failing_bots": failing_bots,
        "failing_chart": bar_chart(
            title="Failed delivery attempts by bot, last day",
            bars=[
                Bar(bot.name, bot.failed, f"{bot.name}: {bot.last_failure_reason}")
                for bot in figures.failing_bots
            ],
            colour=FAILED.colour,
        ),
        "analytics_chart": bar_chart(
            title="Counted by bots (trackAnalytics), last day",
            bars=[
                Bar(f"{tracked.name} ({tracked.bot_name})", tracked.count)
                for tracked in figures.analytics
            ],
            colour=ANALYTICS_COLOUR,
        ),
        "files_total": sum(count for _, count in figures.indexing),
        "indexing_chart": bar_chart(
            title="Files by indexing outcome",
            bars=[Bar(status.replace("_", " "), count) for status, count in figures.indexing],
            colour=INDEXING_COLOUR,
        ),
    }


def _timeline_chart(
    timeline: Timeline, title: str, label_every: timedelta, whole: bool
) -> SafeString:
    """Created, delivered and failed, labelled at multiples of `label_every`."""
    return line_chart(
        title=title,
        times=timeline.times,
        series=[
            replace(CREATED, values=timeline.created),
            replace(DELIVERED, values=timeline.delivered),
            replace(FAILED, values=timeline.failed),
        ],
        y_label="events per minute",
        label_every=label_every,
        whole=whole,
    )
