from rest_framework.request import Request
from rest_framework.response import Response

from bots.authentication import BotTokenAuthentication
from bots.permissions import CanReadRuntime
from bots.principals import bot_principal
from files.presenters import passage_json
from files.services import file_get, passages_list
from platform_site.api.pagination import page_request
from platform_site.api.views import PermissionsByMethod


class FilePassagesView(PermissionsByMethod):
    authentication_classes = [BotTokenAuthentication]
    permissions_by_method = {"GET": [CanReadRuntime]}

    def get(self, request: Request, file_id: str) -> Response:
        principal = bot_principal(request)
        page = page_request(request.query_params, size_param="limit")
        file = file_get(bot=principal.bot, id_or_key=file_id)
        result = passages_list(file=file, page=page)
        return Response(
            {"passages": [passage_json(p) for p in result.items], "meta": result.meta()}
        )
