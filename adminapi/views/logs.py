from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from adminapi.bot_logs import bot_logs_list
from adminapi.bots import bot_get
from adminapi.presenters import bot_log_json
from adminapi.serializers import BotLogQuery
from adminapi.views.base import AdminView
from bots.permissions import CanReadRuntime
from bots.principals import workspace_principal
from platform_site.api.pagination import page_request
from platform_site.api.query import validate_query
from platform_site.api.schema import ERRORS, NEXT_TOKEN, PAGE_SIZE


class BotLogsView(AdminView):
    permissions_by_method = {"GET": [CanReadRuntime]}

    @extend_schema(
        summary="The bot's logs: its webhook delivery attempts, newest first",
        operation_id="getBotLogs",
        parameters=[BotLogQuery, NEXT_TOKEN, PAGE_SIZE],
        responses={200: OpenApiTypes.OBJECT, **ERRORS},
    )
    def get(self, request: Request, bot_id: str) -> Response:
        bot = bot_get(workspace=workspace_principal(request).workspace, bot_id=bot_id)
        query = validate_query(BotLogQuery, request.query_params)
        page = bot_logs_list(
            bot=bot,
            page=page_request(request.query_params),
            time_start=query.get("timeStart"),
            time_end=query.get("timeEnd"),
            level=query.get("level"),
        )
        body: dict[str, Any] = {"logs": [bot_log_json(a) for a in page.items], "meta": page.meta()}
        # Clients of the hosted API read the token at the top level of this one.
        if page.next_token:
            body["nextToken"] = page.next_token
        return Response(body)
