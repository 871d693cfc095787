from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from chat.filters import PARTICIPANT_IDS_MAX
from chat.presenters import conversation_runtime_json
from chat.runtime.answers import (
    ConversationAnswerSerializer,
    ConversationCreatedAnswerSerializer,
    ConversationPageSerializer,
)
from chat.runtime.serializers import (
    RuntimeConversationCreateSerializer,
    RuntimeConversationGetOrCreateSerializer,
    RuntimeConversationUpdateSerializer,
)
from chat.runtime.views.base import CHAT_RESOURCE_PERMISSIONS, RuntimeViewSet
from chat.selectors.conversations import conversation_get, conversations_list
from chat.services.conversations import (
    bot_conversation_create,
    bot_conversation_delete,
    bot_conversation_get_or_create,
    bot_conversation_update,
)
from platform_site.api.answers import Answers
from platform_site.api.idempotency import idempotent_create
from platform_site.api.principals import bot_principal
from platform_site.api.schema import (
    NEXT_TOKEN,
    PAGE_SIZE,
    TAGS,
    blank_or,
)
from platform_site.foundation.pagination import page_request


class RuntimeConversationViewSet(RuntimeViewSet):
    answers = Answers(
        one=ConversationAnswerSerializer,
        page=ConversationPageSerializer,
        got_or_created=ConversationCreatedAnswerSerializer,
    )
    permissions_by_action = CHAT_RESOURCE_PERMISSIONS

    @extend_schema(
        summary="Create a conversation of the bot in a channel",
        description=(
            "It has no owner and no participants: the bot adds them. Its id in the chat"
            " interface is its runtime id. `integrationName` (deprecated) must name an"
            " integration installed on the bot."
        ),
        operation_id="createConversation",
        request=RuntimeConversationCreateSerializer,
    )
    @idempotent_create
    def create(self, request: Request) -> Response:
        serializer = RuntimeConversationCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        conversation = bot_conversation_create(
            bot=bot_principal(request).bot,
            channel=data["channel"],
            tags=data["tags"],
            properties=data["properties"],
            integration_name=data.get("integrationName"),
        )
        return Response({"conversation": conversation_runtime_json(conversation)}, status=201)

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
    )
    def list(self, request: Request) -> Response:
        page = conversations_list(
            bot=bot_principal(request).bot,
            query=request.query_params,
            page=page_request(request.query_params),
        )
        return Response(page.json("conversations", conversation_runtime_json))

    @extend_schema(
        summary="Get the bot's conversation in a channel with these tags, or create it",
        description=(
            "A conversation of the channel matches when every tag named by"
            " `discriminateByTags` has the same value (or is absent from both), or, without"
            ' it, when all tags are the same; tags and properties given null or "" are left'
            " out. With no tag to match on, a new conversation is made. One found is answered"
            " as it is. 201 when it is made, else 200; `meta.created` says which."
        ),
        operation_id="getOrCreateConversation",
        request=RuntimeConversationGetOrCreateSerializer,
    )
    @idempotent_create
    def get_or_create(self, request: Request) -> Response:
        serializer = RuntimeConversationGetOrCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        conversation, created = bot_conversation_get_or_create(
            bot=bot_principal(request).bot,
            channel=data["channel"],
            tags=data["tags"],
            discriminate_by_tags=data.get("discriminateByTags"),
            properties=data["properties"],
            integration_name=data.get("integrationName"),
        )
        return Response(
            {"conversation": conversation_runtime_json(conversation), "meta": {"created": created}},
            status=201 if created else 200,
        )

    @extend_schema(
        summary="Get a conversation of the bot",
        operation_id="getConversation",
    )
    def retrieve(self, request: Request, conversation_id: str) -> Response:
        conversation = conversation_get(
            bot=bot_principal(request).bot, conversation_id=conversation_id
        )
        return Response({"conversation": conversation_runtime_json(conversation)})

    @extend_schema(
        summary="Update a conversation of the bot",
        description=(
            'Tags and properties are merged: a key given null or "" is removed.'
            " `currentTaskId` is deprecated and ignored, as by the hosted API."
        ),
        operation_id="updateConversation",
        request=RuntimeConversationUpdateSerializer,
    )
    def update(self, request: Request, conversation_id: str) -> Response:
        serializer = RuntimeConversationUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        conversation = bot_conversation_update(
            bot=bot_principal(request).bot,
            conversation_id=conversation_id,
            tags=data.get("tags"),
            properties=data.get("properties"),
        )
        return Response({"conversation": conversation_runtime_json(conversation)})

    @extend_schema(
        summary="Delete a conversation of the bot, with its messages and participations",
        description=(
            "Messages still scheduled in it are canceled. Its participants' listeners hear"
            " that they were removed (`participant_removed`), which ends their streams."
        ),
        operation_id="deleteConversation",
    )
    def destroy(self, request: Request, conversation_id: str) -> Response:
        bot = bot_principal(request).bot
        bot_conversation_delete(
            conversation=conversation_get(bot=bot, conversation_id=conversation_id)
        )
        return Response({})
