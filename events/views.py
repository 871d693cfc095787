from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from events.answers import EventAnswerSerializer, EventPageSerializer
from events.models import EventStatus
from events.presenters import event_json
from events.selectors.events import event_get, events_list
from events.serializers import EventCreateSerializer
from events.services.events import event_cancel, event_create
from platform_site.api.answers import Answers, EmptyAnswerSerializer
from platform_site.api.idempotency import idempotent_create
from platform_site.api.permissions import CanReadRuntime, CanWriteEvents
from platform_site.api.principals import bot_principal
from platform_site.api.schema import (
    NEXT_TOKEN,
    PAGE_SIZE,
    blank_or,
    id_pattern,
    query_id_filter,
)
from platform_site.api.token_authentication import BotTokenAuthentication
from platform_site.api.views import ApiViewSet
from platform_site.foundation.pagination import page_request


class EventViewSet(ApiViewSet):
    """A bot's events."""

    answers = Answers(one=EventAnswerSerializer, page=EventPageSerializer)

    authentication_classes = [BotTokenAuthentication]
    permissions_by_action = {
        "create": [CanWriteEvents],
        "list": [CanReadRuntime],
        "retrieve": [CanReadRuntime],
        "cancel": [CanWriteEvents],
    }

    @extend_schema(
        summary="Create an event",
        operation_id="createEvent",
        request=EventCreateSerializer,
        parameters=[
            OpenApiParameter(
                "x-integration-id",
                {"type": "string", "pattern": blank_or(id_pattern("intg"))},
                OpenApiParameter.HEADER,
                description="An integration installed on the bot, which the event records",
            ),
            OpenApiParameter(
                "x-integration-alias",
                str,
                OpenApiParameter.HEADER,
                description="The alias of an integration installed on the bot",
            ),
        ],
    )
    @idempotent_create
    def create(self, request: Request) -> Response:
        principal = bot_principal(request)
        serializer = EventCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        event = event_create(
            bot_id=principal.bot.id,
            type=data["type"],
            payload=data["payload"],
            schedule=data.get("schedule"),
            conversation_id=data.get("conversationId"),
            user_id=data.get("userId"),
            message_id=data.get("messageId"),
            workflow_id=data.get("workflowId"),
            integration_id=request.headers.get("x-integration-id"),
            integration_alias=request.headers.get("x-integration-alias"),
        )
        return Response({"event": event_json(event)}, status=201)

    @extend_schema(
        summary="List the bot's events, newest first",
        operation_id="listEvents",
        parameters=[
            OpenApiParameter("type", {"type": "string", "maxLength": 200}),
            *(
                query_id_filter(name, description="Only the events linked to this object")
                for name in ("conversationId", "userId", "messageId", "workflowId")
            ),
            OpenApiParameter("status", {"type": "string", "enum": ["", *EventStatus.values]}),
            NEXT_TOKEN,
            PAGE_SIZE,
        ],
    )
    def list(self, request: Request) -> Response:
        principal = bot_principal(request)
        page = events_list(
            bot=principal.bot, query=request.query_params, page=page_request(request.query_params)
        )
        return Response(page.json("events", event_json))

    @extend_schema(
        summary="Get an event",
        operation_id="getEvent",
    )
    def retrieve(self, request: Request, event_id: str) -> Response:
        event = event_get(bot=bot_principal(request).bot, event_id=event_id)
        return Response({"event": event_json(event)})

    @extend_schema(
        summary="Cancel a scheduled event (400 once it is no longer scheduled)",
        operation_id="cancelScheduledEvent",
        responses={200: EmptyAnswerSerializer},
    )
    def cancel(self, request: Request, event_id: str) -> Response:
        event_cancel(bot=bot_principal(request).bot, event_id=event_id)
        return Response({})
