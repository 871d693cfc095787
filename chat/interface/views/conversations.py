from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from chat.interface.answers import ChatConversationAnswerSerializer, ChatConversationPageSerializer
from chat.interface.serializers import (
    ConversationCreateSerializer,
    ConversationGetOrCreateSerializer,
)
from chat.interface.views.base import ChatInterfaceViewSet
from chat.permissions import IsChatUser
from chat.presenters import conversation_chat_json
from chat.principals import chat_principal
from chat.selectors.conversations import chat_conversation_get, chat_conversations_list
from chat.services.conversations import (
    conversation_create,
    conversation_delete,
    conversation_get_or_create,
)
from platform_site.api.answers import Answers
from platform_site.api.idempotency import idempotent_create
from platform_site.api.schema import ERROR, NEXT_TOKEN, PAGE_SIZE
from platform_site.foundation.pagination import page_request


class ChatConversationViewSet(ChatInterfaceViewSet):
    answers = Answers(
        one=ChatConversationAnswerSerializer,
        page=ChatConversationPageSerializer,
        got_or_created=ChatConversationAnswerSerializer,
    )
    permissions_by_action = {
        "create": [IsChatUser],
        "list": [IsChatUser],
        "get_or_create": [IsChatUser],
        "retrieve": [IsChatUser],
        "destroy": [IsChatUser],
    }

    @extend_schema(
        summary="Create a conversation owned by the key's user",
        operation_id="chatCreateConversation",
        request=ConversationCreateSerializer,
        responses={201: ChatConversationAnswerSerializer, 409: ERROR},
    )
    @idempotent_create
    def create(self, request: Request, webhook_id: str) -> Response:
        serializer = ConversationCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        conversation = conversation_create(
            creator=chat_principal(request).user, chat_id=serializer.validated_data.get("id")
        )
        return Response({"conversation": conversation_chat_json(conversation)}, status=201)

    @extend_schema(
        summary="List the conversations the key's user takes part in, newest first",
        operation_id="chatListConversations",
        parameters=[NEXT_TOKEN, PAGE_SIZE],
    )
    def list(self, request: Request, webhook_id: str) -> Response:
        page = chat_conversations_list(
            user=chat_principal(request).user, page=page_request(request.query_params)
        )
        return Response(page.json("conversations", conversation_chat_json))

    @extend_schema(
        summary="Get a conversation the key's user takes part in, or create it",
        description="201 when the conversation was made, 200 when it existed.",
        operation_id="chatGetOrCreateConversation",
        request=ConversationGetOrCreateSerializer,
    )
    @idempotent_create
    def get_or_create(self, request: Request, webhook_id: str) -> Response:
        serializer = ConversationGetOrCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        conversation, created = conversation_get_or_create(
            user=chat_principal(request).user, chat_id=serializer.validated_data["id"]
        )
        return Response(
            {"conversation": conversation_chat_json(conversation)},
            status=201 if created else 200,
        )

    @extend_schema(
        summary="Get a conversation",
        operation_id="chatGetConversation",
    )
    def retrieve(self, request: Request, webhook_id: str, conversation_id: str) -> Response:
        conversation = chat_conversation_get(
            user=chat_principal(request).user, chat_id=conversation_id
        )
        return Response({"conversation": conversation_chat_json(conversation)})

    @extend_schema(
        summary="Delete a conversation the key's user owns",
        operation_id="chatDeleteConversation",
    )
    def destroy(self, request: Request, webhook_id: str, conversation_id: str) -> Response:
        user = chat_principal(request).user
        conversation_delete(
            user=user, conversation=chat_conversation_get(user=user, chat_id=conversation_id)
        )
        return Response({})
