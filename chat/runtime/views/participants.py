from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from chat.presenters import participant_runtime_json, user_runtime_json
from chat.runtime.answers import ParticipantAnswerSerializer, ParticipantPageSerializer
from chat.runtime.serializers import RuntimeParticipantAddSerializer
from chat.runtime.views.base import CHAT_RESOURCE_PERMISSIONS, RuntimeViewSet
from chat.selectors.conversations import conversation_get
from chat.selectors.participants import participant_get, participants_list
from chat.services.participants import bot_participant_add, bot_participant_remove
from platform_site.api.answers import Answers
from platform_site.api.idempotency import idempotent_create
from platform_site.api.principals import bot_principal
from platform_site.api.schema import NEXT_TOKEN, PAGE_SIZE
from platform_site.foundation.pagination import page_request


class RuntimeParticipantViewSet(RuntimeViewSet):
    """A conversation's participants, as the bot sees them: users in their
    runtime shape. The bot adds any user of its own to any of its
    conversations, and removes anyone (the chat interface's owner too, who
    then owns it no more)."""

    answers = Answers(one=ParticipantAnswerSerializer, page=ParticipantPageSerializer)

    permissions_by_action = CHAT_RESOURCE_PERMISSIONS

    @extend_schema(
        summary="List a conversation's participants in the order they joined",
        operation_id="listParticipants",
        parameters=[NEXT_TOKEN, PAGE_SIZE],
    )
    def list(self, request: Request, conversation_id: str) -> Response:
        conversation = conversation_get(
            bot=bot_principal(request).bot, conversation_id=conversation_id
        )
        page = participants_list(conversation=conversation, page=page_request(request.query_params))
        return Response(page.json("participants", participant_runtime_json))

    @extend_schema(
        summary="Add a user of the bot to a conversation of the bot",
        description=(
            "201 when the user was added, 200 when they took part already (nothing"
            " changes). The conversation's listeners hear of it (`participant_added`)."
        ),
        operation_id="addParticipant",
        request=RuntimeParticipantAddSerializer,
        responses={200: ParticipantAnswerSerializer, 201: ParticipantAnswerSerializer},
    )
    @idempotent_create
    def create(self, request: Request, conversation_id: str) -> Response:
        serializer = RuntimeParticipantAddSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        user, added = bot_participant_add(
            conversation=conversation_get(
                bot=bot_principal(request).bot, conversation_id=conversation_id
            ),
            user_id=serializer.validated_data["userId"],
        )
        return Response({"participant": user_runtime_json(user)}, status=201 if added else 200)

    @extend_schema(
        summary="Get a participant of a conversation",
        operation_id="getParticipant",
    )
    def retrieve(self, request: Request, conversation_id: str, user_id: str) -> Response:
        conversation = conversation_get(
            bot=bot_principal(request).bot, conversation_id=conversation_id
        )
        user = participant_get(conversation=conversation, user_id=user_id)
        return Response({"participant": user_runtime_json(user)})

    @extend_schema(
        summary="Remove a participant from a conversation",
        description=(
            "Anyone may be removed, the conversation's owner in the chat interface too: it"
            " is then owned by nobody, and nobody may add, remove or delete there through"
            " the chat interface. The conversation's listeners hear of it"
            " (`participant_removed`)."
        ),
        operation_id="removeParticipant",
    )
    def destroy(self, request: Request, conversation_id: str, user_id: str) -> Response:
        conversation = conversation_get(
            bot=bot_principal(request).bot, conversation_id=conversation_id
        )
        bot_participant_remove(
            conversation=conversation,
            user=participant_get(conversation=conversation, user_id=user_id),
        )
        return Response({})
