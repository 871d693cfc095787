from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from chat.interface.answers import ChatMessageAnswerSerializer, ChatMessagePageSerializer
from chat.interface.serializers import (
    ChatMessageCreateSerializer,
    ChatMessageUpdateSerializer,
    FeedbackSerializer,
)
from chat.interface.views.base import ChatInterfaceViewSet
from chat.permissions import IsChatUser
from chat.presenters import message_chat_json
from chat.principals import chat_principal
from chat.selectors.conversations import chat_conversation_get
from chat.selectors.messages import chat_message_get, chat_messages_list
from chat.services.feedback import feedback_remove, feedback_set
from chat.services.messages import chat_message_create, chat_message_delete, chat_message_update
from platform_site.api.answers import Answers, EmptyAnswerSerializer
from platform_site.api.idempotency import idempotent_create
from platform_site.api.schema import NEXT_TOKEN, PAGE_SIZE
from platform_site.foundation.pagination import page_request


class ChatMessageViewSet(ChatInterfaceViewSet):
    answers = Answers(one=ChatMessageAnswerSerializer, page=ChatMessagePageSerializer)
    permissions_by_action = {
        "create": [IsChatUser],
        "retrieve": [IsChatUser],
        "destroy": [IsChatUser],
        "update": [IsChatUser],
        "list": [IsChatUser],
        "feedback_set": [IsChatUser],
        "feedback_remove": [IsChatUser],
    }

    @extend_schema(
        summary="Send a message as the key's user",
        operation_id="chatCreateMessage",
        request=ChatMessageCreateSerializer,
    )
    @idempotent_create
    def create(self, request: Request, webhook_id: str) -> Response:
        principal = chat_principal(request)
        serializer = ChatMessageCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        message = chat_message_create(
            user=principal.user,
            conversation_chat_id=data["conversationId"],
            payload=data["payload"],
            metadata=data.get("metadata"),
        )
        return Response({"message": message_chat_json(message)}, status=201)

    @extend_schema(
        summary="Get a message of a conversation the key's user takes part in",
        operation_id="chatGetMessage",
    )
    def retrieve(self, request: Request, webhook_id: str, message_id: str) -> Response:
        message = chat_message_get(user=chat_principal(request).user, message_id=message_id)
        return Response({"message": message_chat_json(message)})

    @extend_schema(
        summary="Change a message the key's user sent (the official webchat's updateMessage)",
        description="Its payload (another of its type) and its metadata; listeners hear of it.",
        operation_id="chatUpdateMessage",
        request=ChatMessageUpdateSerializer,
    )
    def update(self, request: Request, webhook_id: str, message_id: str) -> Response:
        serializer = ChatMessageUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        user = chat_principal(request).user
        message = chat_message_update(
            user=user,
            message=chat_message_get(user=user, message_id=message_id),
            payload=data.get("payload"),
            metadata=data.get("metadata"),
        )
        return Response({"message": message_chat_json(message)})

    @extend_schema(
        summary="Delete a message the key's user sent",
        operation_id="chatDeleteMessage",
    )
    def destroy(self, request: Request, webhook_id: str, message_id: str) -> Response:
        user = chat_principal(request).user
        chat_message_delete(user=user, message=chat_message_get(user=user, message_id=message_id))
        return Response({})

    @extend_schema(
        summary="List a conversation's messages, newest first",
        operation_id="chatListConversationMessages",
        parameters=[NEXT_TOKEN, PAGE_SIZE],
    )
    def list(self, request: Request, webhook_id: str, conversation_id: str) -> Response:
        user = chat_principal(request).user
        conversation = chat_conversation_get(user=user, chat_id=conversation_id)
        page = chat_messages_list(
            conversation=conversation, page=page_request(request.query_params), reader=user
        )
        return Response(page.json("messages", message_chat_json))

    @extend_schema(
        summary="Give or change the key's user's feedback on a message (the official webchat's)",
        description=(
            "On a message of a conversation the user takes part in, not one of their own."
            " The bot receives a `message_feedback` event `{messageId, value, comment?}`."
        ),
        operation_id="chatAddMessageFeedback",
        request=FeedbackSerializer,
        responses={200: EmptyAnswerSerializer},
    )
    def feedback_set(self, request: Request, webhook_id: str, message_id: str) -> Response:
        serializer = FeedbackSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        user = chat_principal(request).user
        feedback_set(
            user=user,
            message=chat_message_get(user=user, message_id=message_id),
            value=data["value"],
            comment=data.get("comment", ""),
        )
        return Response({})

    @extend_schema(
        summary="Take back the key's user's feedback on a message",
        description="The bot receives a `message_feedback` event whose `value` is null.",
        operation_id="chatRemoveMessageFeedback",
        responses={200: EmptyAnswerSerializer},
    )
    def feedback_remove(self, request: Request, webhook_id: str, message_id: str) -> Response:
        user = chat_principal(request).user
        feedback_remove(user=user, message=chat_message_get(user=user, message_id=message_id))
        return Response({})
