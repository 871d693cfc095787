from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from chat.interface.answers import ChatEventAnswerSerializer
from chat.interface.serializers import ChatEventCreateSerializer
from chat.interface.views.base import ChatInterfaceViewSet
from chat.permissions import IsChatUser
from chat.presenters import chat_event_json
from chat.principals import chat_principal
from chat.selectors.chat_events import chat_event_get
from chat.services.chat_events import chat_event_create
from platform_site.api.answers import Answers
from platform_site.api.idempotency import idempotent_create


class ChatEventViewSet(ChatInterfaceViewSet):
    answers = Answers(one=ChatEventAnswerSerializer)
    permissions_by_action = {"create": [IsChatUser], "retrieve": [IsChatUser]}

    @extend_schema(
        summary="Send a custom event to the bot in a conversation",
        operation_id="chatCreateEvent",
        request=ChatEventCreateSerializer,
    )
    @idempotent_create
    def create(self, request: Request, webhook_id: str) -> Response:
        serializer = ChatEventCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        user = chat_principal(request).user
        event, conversation = chat_event_create(
            user=user,
            conversation_chat_id=data["conversationId"],
            payload=data["payload"],
            bind_conversation=data["bindConversation"],
            bind_user=data["bindUser"],
        )
        body = chat_event_json(event, conversation=conversation, user=user)
        return Response({"event": body}, status=201)

    @extend_schema(
        summary="Get a custom event of a conversation the key's user takes part in",
        operation_id="chatGetEvent",
    )
    def retrieve(self, request: Request, webhook_id: str, event_id: str) -> Response:
        event = chat_event_get(user=chat_principal(request).user, event_id=event_id)
        return Response({"event": chat_event_json(event)})
