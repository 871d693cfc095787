from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from chat.interface.answers import ChatParticipantAnswerSerializer, ChatParticipantPageSerializer
from chat.interface.serializers import ParticipantAddSerializer
from chat.interface.views.base import ChatInterfaceViewSet
from chat.permissions import IsChatUser
from chat.presenters import participant_chat_json, user_chat_json
from chat.principals import chat_principal
from chat.selectors.conversations import chat_conversation_get
from chat.selectors.participants import chat_participant_get, participants_list
from chat.services.participants import chat_participant_add, chat_participant_remove
from platform_site.api.answers import Answers
from platform_site.api.idempotency import idempotent_create
from platform_site.api.schema import NEXT_TOKEN, PAGE_SIZE
from platform_site.foundation.pagination import page_request


class ChatParticipantViewSet(ChatInterfaceViewSet):
    answers = Answers(one=ChatParticipantAnswerSerializer, page=ChatParticipantPageSerializer)
    permissions_by_action = {
        "list": [IsChatUser],
        "create": [IsChatUser],
        "retrieve": [IsChatUser],
        "destroy": [IsChatUser],
    }

    @extend_schema(
        summary="List a conversation's participants in the order they joined",
        operation_id="chatListParticipants",
        parameters=[NEXT_TOKEN, PAGE_SIZE],
    )
    def list(self, request: Request, webhook_id: str, conversation_id: str) -> Response:
        conversation = chat_conversation_get(
            user=chat_principal(request).user, chat_id=conversation_id
        )
        page = participants_list(conversation=conversation, page=page_request(request.query_params))
        return Response(page.json("participants", participant_chat_json))

    @extend_schema(
        summary="Add a user of the bot to a conversation the key's user owns",
        description="201 when the user was added, 200 when they already took part.",
        operation_id="chatAddParticipant",
        request=ParticipantAddSerializer,
        responses={200: ChatParticipantAnswerSerializer, 201: ChatParticipantAnswerSerializer},
    )
    @idempotent_create
    def create(self, request: Request, webhook_id: str, conversation_id: str) -> Response:
        serializer = ParticipantAddSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        actor = chat_principal(request).user
        user, added = chat_participant_add(
            actor=actor,
            conversation=chat_conversation_get(user=actor, chat_id=conversation_id),
            chat_user_id=serializer.validated_data["userId"],
        )
        return Response({"participant": user_chat_json(user)}, status=201 if added else 200)

    @extend_schema(
        summary="Get a participant of a conversation",
        operation_id="chatGetParticipant",
    )
    def retrieve(
        self, request: Request, webhook_id: str, conversation_id: str, user_id: str
    ) -> Response:
        conversation = chat_conversation_get(
            user=chat_principal(request).user, chat_id=conversation_id
        )
        user = chat_participant_get(conversation=conversation, chat_user_id=user_id)
        return Response({"participant": user_chat_json(user)})

    @extend_schema(
        summary="Remove a participant (not the owner) from a conversation the key's user owns",
        operation_id="chatRemoveParticipant",
    )
    def destroy(
        self, request: Request, webhook_id: str, conversation_id: str, user_id: str
    ) -> Response:
        actor = chat_principal(request).user
        chat_participant_remove(
            actor=actor,
            conversation=chat_conversation_get(user=actor, chat_id=conversation_id),
            chat_user_id=user_id,
        )
        return Response({})
