from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from bots.authentication import BotTokenAuthentication
from bots.permissions import CanReadRuntime
from bots.principals import bot_principal
from files.presenters import passage_json
from files.services import file_get, passages_list
from platform_site.api.pagination import page_request
from platform_site.api.schema import ERRORS, NEXT_TOKEN
from platform_site.api.views import ApiView


class FilePassagesView(ApiView):
    authentication_classes = [BotTokenAuthentication]
    permissions_by_method = {"GET": [CanReadRuntime]}

    @extend_schema(
        summary="List a file's passages",
        parameters=[OpenApiParameter("limit", int, description="1 to 200, default 20"), NEXT_TOKEN],
        responses={200: OpenApiTypes.OBJECT, **ERRORS},
    )
    def get(self, request: Request, file_id: str) -> Response:
        principal = bot_principal(request)
        page = page_request(request.query_params, size_param="limit")
        file = file_get(bot=principal.bot, id_or_key=file_id)
        result = passages_list(file=file, page=page)
        return Response(
            {"passages": [passage_json(p) for p in result.items], "meta": result.meta()}
        )
