from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from bots.permissions import CanReadChat
from bots.principals import bot_principal
from chat.filters import PARTICIPANT_IDS_MAX
from chat.presenters import conversation_runtime_json
from chat.runtime.views.base import RuntimeChatViewSet
from chat.selectors.conversations import conversation_get, conversations_list
from platform_site.api.pagination import page_request
from platform_site.api.schema import (
    ERRORS,
    NEXT_TOKEN,
    PAGE_SIZE,
    TAGS,
    blank_or,
)


class ConversationViewSet(RuntimeChatViewSet):
    permissions_by_action = {"list": [CanReadChat], "retrieve": [CanReadChat]}

    @extend_schema(
        summary="List the bot's conversations, newest first",
        operation_id="listConversations",
        parameters=[
            OpenApiParameter(
                "participantIds",
                {
                    "type": "array",
                    "maxItems": PARTICIPANT_IDS_MAX,
                    "items": {"type": "string", "pattern": blank_or(r"[^\x00]{28,36}")},
                },
                description=(
                    "Only conversations that all of these users take part in (empty values"
                    " are ignored; `participantIds[]` is taken too)"
                ),
            ),
            TAGS,
            NEXT_TOKEN,
            PAGE_SIZE,
        ],
        responses={200: OpenApiTypes.OBJECT, **ERRORS},
    )
    def list(self, request: Request) -> Response:
        page = conversations_list(
            bot=bot_principal(request).bot,
            query=request.query_params,
            page=page_request(request.query_params),
        )
        return Response(page.json("conversations", conversation_runtime_json))

    @extend_schema(
        summary="Get a conversation of the bot",
        operation_id="getConversation",
        responses={200: OpenApiTypes.OBJECT, **ERRORS},
    )
    def retrieve(self, request: Request, conversation_id: str) -> Response:
        conversation = conversation_get(
            bot=bot_principal(request).bot, conversation_id=conversation_id
        )
        return Response({"conversation": conversation_runtime_json(conversation)})
