from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from bots.authentication import BotTokenAuthentication
from bots.permissions import CanWriteEvents
from bots.principals import bot_principal
from events.presenters import event_json
from events.serializers import EventCreateSerializer
from events.services import event_create
from platform_site.api.schema import ERRORS
from platform_site.api.views import ApiView


class EventCollectionView(ApiView):
    authentication_classes = [BotTokenAuthentication]
    permissions_by_method = {"POST": [CanWriteEvents]}

    @extend_schema(
        summary="Create an event",
        request=EventCreateSerializer,
        responses={201: OpenApiTypes.OBJECT, **ERRORS},
        parameters=[
            OpenApiParameter("x-integration-id", str, OpenApiParameter.HEADER),
            OpenApiParameter("x-integration-alias", str, OpenApiParameter.HEADER),
        ],
    )
    def post(self, request: Request) -> Response:
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
