from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from adminapi.answers import BotAnswerSerializer, BotListSerializer, BotLogPageSerializer
from adminapi.presenters import bot_json, bot_log_json, bot_summary_json
from adminapi.serializers import BotListQuery, BotLogQuery, BotWriteSerializer
from adminapi.views.base import AdminViewSet, request_actor
from bots.selectors.bots import bot_get, bots_list
from bots.services.bots import bot_create, bot_delete, bot_update
from events.selectors.attempts import bot_logs_list
from platform_site.api.answers import Answers
from platform_site.api.idempotency import idempotent_create
from platform_site.api.permissions import CanReadBots, CanReadRuntime, CanWriteBots
from platform_site.api.principals import workspace_principal
from platform_site.api.query import validate_query
from platform_site.api.schema import NEXT_TOKEN, PAGE_SIZE, TAGS
from platform_site.foundation.pagination import page_request
from platform_site.foundation.tags import tag_filters

DEFAULT_BOT_NAME = "New bot"
# The model field of each field of the body.
_BOT_FIELDS = {
    "name": "name",
    "tags": "tags",
    "dev": "dev",
    "webhookUrl": "webhook_url",
    "deliveryFormat": "delivery_format",
    "maxExecutionTime": "max_execution_time",
    "configuration": "configuration",
}


def _bot_fields(data: dict[str, Any]) -> dict[str, Any]:
    return {_BOT_FIELDS[name]: value for name, value in data.items()}


class BotViewSet(AdminViewSet):
    """A workspace's bots."""

    answers = Answers()

    permissions_by_action = {
        "list": [CanReadBots],
        "create": [CanWriteBots],
        "retrieve": [CanReadBots],
        "update": [CanWriteBots],
        "destroy": [CanWriteBots],
        "logs": [CanReadRuntime],
    }

    @extend_schema(
        summary="List the workspace's bots",
        operation_id="listBots",
        parameters=[
            BotListQuery,
            TAGS,
            NEXT_TOKEN,
            PAGE_SIZE,
        ],
        responses={200: BotListSerializer},
    )
    def list(self, request: Request) -> Response:
        principal = workspace_principal(request)
        query = validate_query(BotListQuery, request.query_params)
        dev = query.get("dev")
        page = bots_list(
            workspace=principal.workspace,
            page=page_request(request.query_params),
            dev=None if dev is None else dev == "true",
            tags=tag_filters(request.query_params),
            sort_field=query["sortField"],
            sort_direction=query["sortDirection"],
        )
        return Response(page.json("bots", bot_summary_json))

    @extend_schema(
        summary="Create a bot",
        operation_id="createBot",
        request=BotWriteSerializer,
        responses={201: BotAnswerSerializer},
    )
    @idempotent_create
    def create(self, request: Request) -> Response:
        serializer = BotWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        fields = _bot_fields(data)
        fields.setdefault("name", DEFAULT_BOT_NAME)
        bot = bot_create(
            workspace=workspace_principal(request).workspace,
            actor=request_actor(request),
            **fields,
        )
        return Response({"bot": bot_json(bot)}, status=201)

    @extend_schema(
        summary="Get a bot",
        operation_id="getBot",
        responses={200: BotAnswerSerializer},
    )
    def retrieve(self, request: Request, bot_id: str) -> Response:
        bot = bot_get(
            workspace=workspace_principal(request).workspace,
            bot_id=bot_id,
            with_integrations=True,
        )
        return Response({"bot": bot_json(bot)})

    @extend_schema(
        summary="Update a bot: the fields the body names",
        operation_id="updateBot",
        request=BotWriteSerializer,
        responses={200: BotAnswerSerializer},
    )
    def update(self, request: Request, bot_id: str) -> Response:
        bot = bot_get(
            workspace=workspace_principal(request).workspace,
            bot_id=bot_id,
            with_integrations=True,
        )
        serializer = BotWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        bot = bot_update(
            bot=bot, actor=request_actor(request), **_bot_fields(serializer.validated_data)
        )
        return Response({"bot": bot_json(bot)})

    @extend_schema(
        summary="Delete a bot and everything it owns",
        operation_id="deleteBot",
    )
    def destroy(self, request: Request, bot_id: str) -> Response:
        bot = bot_get(workspace=workspace_principal(request).workspace, bot_id=bot_id)
        bot_delete(bot=bot, actor=request_actor(request))
        return Response({})

    @extend_schema(
        summary="The bot's logs: its webhook delivery attempts, newest first",
        operation_id="getBotLogs",
        parameters=[BotLogQuery, NEXT_TOKEN, PAGE_SIZE],
        responses={200: BotLogPageSerializer},
    )
    def logs(self, request: Request, bot_id: str) -> Response:
        bot = bot_get(workspace=workspace_principal(request).workspace, bot_id=bot_id)
        query = validate_query(BotLogQuery, request.query_params)
        page = bot_logs_list(
            bot=bot,
            page=page_request(request.query_params),
            time_start=query.get("timeStart"),
            time_end=query.get("timeEnd"),
            level=query.get("level"),
        )
        body = page.json("logs", bot_log_json)
        # Clients of the hosted API read the token at the top level of this one.
        if page.next_token:
            body["nextToken"] = page.next_token
        return Response(body)
