from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from adminapi.presenters import bot_summary_json
from adminapi.serializers import BotListQuery
from adminapi.services import bots_list
from bots.authentication import WorkspaceTokenAuthentication
from bots.permissions import CanReadBots
from bots.principals import workspace_principal
from platform_site.api.pagination import page_request
from platform_site.api.query import validate_query
from platform_site.api.schema import ERRORS, NEXT_TOKEN, PAGE_SIZE
from platform_site.api.tags import tag_filters
from platform_site.api.views import ApiView


class BotCollectionView(ApiView):
    authentication_classes = [WorkspaceTokenAuthentication]
    permissions_by_method = {"GET": [CanReadBots]}

    @extend_schema(
        summary="List the workspace's bots",
        parameters=[
            BotListQuery,
            OpenApiParameter("tags[key]", str, description="Only bots with this tag value"),
            NEXT_TOKEN,
            PAGE_SIZE,
        ],
        responses={200: OpenApiTypes.OBJECT, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        principal = workspace_principal(request)
        query = validate_query(BotListQuery, request.query_params)
        dev = query.get("dev")
        result = bots_list(
            workspace=principal.workspace,
            page=page_request(request.query_params),
            dev=None if dev is None else dev == "true",
            tags=tag_filters(request.query_params),
            sort_field=query["sortField"],
            sort_direction=query["sortDirection"],
        )
        return Response(
            {"bots": [bot_summary_json(b) for b in result.items], "meta": result.meta()}
        )
