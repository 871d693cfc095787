from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from chat.presenters import user_runtime_json
from chat.runtime.answers import (
    UserAnswerSerializer,
    UserCreatedAnswerSerializer,
    UserPageSerializer,
)
from chat.runtime.serializers import (
    RuntimeUserCreateSerializer,
    RuntimeUserGetOrCreateSerializer,
    RuntimeUserUpdateSerializer,
)
from chat.runtime.views.base import CHAT_RESOURCE_PERMISSIONS, RuntimeViewSet
from chat.selectors.users import user_get, users_list
from chat.services.users import user_create, user_delete, user_get_or_create, user_update
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


class RuntimeUserViewSet(RuntimeViewSet):
    answers = Answers(
        one=UserAnswerSerializer,
        page=UserPageSerializer,
        got_or_created=UserCreatedAnswerSerializer,
    )
    permissions_by_action = CHAT_RESOURCE_PERMISSIONS

    @extend_schema(
        summary="Create a user of the bot",
        description=(
            "Its id in the chat interface is its runtime id. `integrationName` (deprecated)"
            " must name an integration installed on the bot."
        ),
        operation_id="createUser",
        request=RuntimeUserCreateSerializer,
    )
    @idempotent_create
    def create(self, request: Request) -> Response:
        serializer = RuntimeUserCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        user = user_create(
            bot=bot_principal(request).bot,
            tags=data["tags"],
            name=data.get("name", ""),
            picture_url=data.get("pictureUrl", ""),
            properties=data["properties"],
            attributes=data["attributes"],
            integration_name=data.get("integrationName"),
        )
        return Response({"user": user_runtime_json(user)}, status=201)

    @extend_schema(
        summary="List the bot's users, newest first",
        operation_id="listUsers",
        parameters=[
            query_id_filter(
                "conversationId", description="Only the participants of this conversation"
            ),
            TAGS,
            NEXT_TOKEN,
            PAGE_SIZE,
        ],
    )
    def list(self, request: Request) -> Response:
        page = users_list(
            bot=bot_principal(request).bot,
            query=request.query_params,
            page=page_request(request.query_params),
        )
        return Response(page.json("users", user_runtime_json))

    @extend_schema(
        summary="Get the bot's user with these tags, or create it",
        description=(
            "Tags match when every tag named by `discriminateByTags` has the same value (or is"
            " absent from both), or, without it, when all tags are the same; tags, properties"
            ' and attributes given null or "" are left out. With no tag to match on, a new'
            " user is made. A user found is answered as it is. 201 when it is made, else 200;"
            " `meta.created` says which."
        ),
        operation_id="getOrCreateUser",
        request=RuntimeUserGetOrCreateSerializer,
    )
    @idempotent_create
    def get_or_create(self, request: Request) -> Response:
        serializer = RuntimeUserGetOrCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        user, created = user_get_or_create(
            bot=bot_principal(request).bot,
            tags=data["tags"],
            discriminate_by_tags=data.get("discriminateByTags"),
            name=data.get("name", ""),
            picture_url=data.get("pictureUrl", ""),
            properties=data["properties"],
            attributes=data["attributes"],
            integration_name=data.get("integrationName"),
        )
        return Response(
            {"user": user_runtime_json(user), "meta": {"created": created}},
            status=201 if created else 200,
        )

    @extend_schema(
        summary="Get a user of the bot",
        operation_id="getUser",
    )
    def retrieve(self, request: Request, user_id: str) -> Response:
        user = user_get(bot=bot_principal(request).bot, user_id=user_id)
        return Response({"user": user_runtime_json(user)})

    @extend_schema(
        summary="Update a user of the bot",
        description=(
            'The fields given change, the others stay; `name` or `pictureUrl` null or ""'
            ' clears it. Tags, properties and attributes are merged: a key given null or ""'
            " is removed."
        ),
        operation_id="updateUser",
        request=RuntimeUserUpdateSerializer,
    )
    def update(self, request: Request, user_id: str) -> Response:
        serializer = RuntimeUserUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        user = user_update(
            bot=bot_principal(request).bot,
            user_id=user_id,
            name=data.get("name"),
            picture_url=data.get("pictureUrl"),
            tags=data.get("tags"),
            properties=data.get("properties"),
            attributes=data.get("attributes"),
        )
        return Response({"user": user_runtime_json(user)})

    @extend_schema(
        summary="Delete a user of the bot, with their messages and participations",
        description=(
            "Their conversations' listeners hear that they left (`participant_removed`);"
            " conversations they own in the chat interface stay, ownerless."
        ),
        operation_id="deleteUser",
    )
    def destroy(self, request: Request, user_id: str) -> Response:
        user_delete(user=user_get(bot=bot_principal(request).bot, user_id=user_id))
        return Response({})
