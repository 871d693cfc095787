from datetime import datetime
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from chat.presenters import message_runtime_json
from chat.runtime.answers import (
    MessageAnswerSerializer,
    MessageCreatedAnswerSerializer,
    MessagePageSerializer,
)
from chat.runtime.serializers import (
    BotMessageCreateSerializer,
    BotMessageGetOrCreateSerializer,
    BotMessageUpdateSerializer,
)
from chat.runtime.views.base import CHAT_RESOURCE_PERMISSIONS, RuntimeViewSet
from chat.selectors.messages import message_get, messages_list
from chat.services.messages import (
    bot_message_create,
    bot_message_delete,
    bot_message_get_or_create,
    bot_message_update,
)
from events.services.events import due_time
from platform_site.api.answers import Answers
from platform_site.api.idempotency import idempotent_create
from platform_site.api.principals import bot_principal
from platform_site.api.schema import (
    NEXT_TOKEN,
    PAGE_SIZE,
    TAGS,
    query_id_filter,
)
from platform_site.foundation.pagination import page_request


def _due_at(data: dict[str, Any]) -> datetime | None:
    schedule = data.get("schedule")
    return None if schedule is None else due_time(schedule=schedule, now=timezone.now())


class RuntimeMessageViewSet(RuntimeViewSet):
    answers = Answers(
        one=MessageAnswerSerializer,
        page=MessagePageSerializer,
        got_or_created=MessageCreatedAnswerSerializer,
    )
    permissions_by_action = CHAT_RESOURCE_PERMISSIONS

    @extend_schema(
        summary="Create a message of the bot (how a bot replies)",
        operation_id="createMessage",
        request=BotMessageCreateSerializer,
    )
    @idempotent_create
    def create(self, request: Request) -> Response:
        serializer = BotMessageCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        message = bot_message_create(
            bot=bot_principal(request).bot,
            conversation_id=data["conversationId"],
            user_id=data["userId"],
            payload=data["payload"],
            tags=data["tags"],
            origin=data.get("origin", ""),
            due_at=_due_at(data),
        )
        return Response({"message": message_runtime_json(message)}, status=201)

    @extend_schema(
        summary="List the bot's messages, newest first",
        operation_id="listMessages",
        parameters=[
            query_id_filter("conversationId", description="Only this conversation's"),
            TAGS,
            NEXT_TOKEN,
            PAGE_SIZE,
        ],
    )
    def list(self, request: Request) -> Response:
        page = messages_list(
            bot=bot_principal(request).bot,
            query=request.query_params,
            page=page_request(request.query_params),
        )
        return Response(page.json("messages", message_runtime_json))

    @extend_schema(
        summary="Get the bot's message with these tags in the conversation, or create it",
        description=(
            "Tags match when every tag named by `discriminateByTags` has the same value, or,"
            " without it, when all tags are the same; a message still scheduled matches too."
            " With no tag to match on, a new message is made. 201 when it is made, else 200;"
            " `meta.created` says which."
        ),
        operation_id="getOrCreateMessage",
        request=BotMessageGetOrCreateSerializer,
    )
    @idempotent_create
    def get_or_create(self, request: Request) -> Response:
        serializer = BotMessageGetOrCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        message, created = bot_message_get_or_create(
            bot=bot_principal(request).bot,
            conversation_id=data["conversationId"],
            user_id=data["userId"],
            payload=data.get("payload"),
            tags=data["tags"],
            discriminate_by_tags=data.get("discriminateByTags"),
            origin=data.get("origin", ""),
            due_at=_due_at(data),
        )
        return Response(
            {"message": message_runtime_json(message), "meta": {"created": created}},
            status=201 if created else 200,
        )

    @extend_schema(
        summary="Get a message of the bot",
        operation_id="getMessage",
    )
    def retrieve(self, request: Request, message_id: str) -> Response:
        message = message_get(bot=bot_principal(request).bot, message_id=message_id)
        return Response({"message": message_runtime_json(message)})

    @extend_schema(
        summary="Update a message of the bot's conversations",
        description=(
            "Any message, a user's too, and one still scheduled. Tags are merged: a tag given"
            ' null or "" is removed. A payload replaces the message\'s, and is one of its'
            " type (`type` may be left out of it; another type is 400). A new payload reaches"
            " the conversation's listeners (`message_updated`)."
        ),
        operation_id="updateMessage",
        request=BotMessageUpdateSerializer,
    )
    def update(self, request: Request, message_id: str) -> Response:
        serializer = BotMessageUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        message = bot_message_update(
            bot=bot_principal(request).bot,
            message_id=message_id,
            tags=data.get("tags"),
            payload=data.get("payload"),
        )
        return Response({"message": message_runtime_json(message)})

    @extend_schema(
        summary="Delete a message of the bot's conversations",
        description=(
            "Any message, a user's too; the conversation's listeners hear of it"
            " (`message_deleted`). A message still scheduled is canceled."
        ),
        operation_id="deleteMessage",
    )
    def destroy(self, request: Request, message_id: str) -> Response:
        bot_message_delete(bot=bot_principal(request).bot, message_id=message_id)
        return Response({})
