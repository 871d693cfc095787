from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from bots.permissions import CanReadChat
from bots.principals import bot_principal
from chat.presenters import user_runtime_json
from chat.runtime.views.base import RuntimeChatViewSet
from chat.selectors.users import user_get, users_list
from platform_site.api.pagination import page_request
from platform_site.api.schema import (
    ERRORS,
    NEXT_TOKEN,
    PAGE_SIZE,
    TAGS,
    query_id_filter,
)


class UserViewSet(RuntimeChatViewSet):
    permissions_by_action = {"list": [CanReadChat], "retrieve": [CanReadChat]}

    @extend_schema(
        summary="List the bot's users, newest first",
        operation_id="listUsers",
        parameters=[
            query_id_filter(
                "conversationId", description="Only the participants of this conversation"
            ),
            TAGS,
            NEXT_TOKEN,
            PAGE_SIZE,
        ],
        responses={200: OpenApiTypes.OBJECT, **ERRORS},
    )
    def list(self, request: Request) -> Response:
        page = users_list(
            bot=bot_principal(request).bot,
            query=request.query_params,
            page=page_request(request.query_params),
        )
        return Response(page.json("users", user_runtime_json))

    @extend_schema(
        summary="Get a user of the bot",
        operation_id="getUser",
        responses={200: OpenApiTypes.OBJECT, **ERRORS},
    )
    def retrieve(self, request: Request, user_id: str) -> Response:
        user = user_get(bot=bot_principal(request).bot, user_id=user_id)
        return Response({"user": user_runtime_json(user)})
