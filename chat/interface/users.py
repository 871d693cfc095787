from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from bots.idempotency import idempotent_create
from chat.authentication import SignedUserKeyAuthentication
from chat.interface.base import ChatView
from chat.interface.serializers import UserCreateSerializer, UserProfileSerializer
from chat.permissions import HoldsSignedKey, IsChatUser, IssuesUserKeys
from chat.presenters import user_chat_json
from chat.principals import chat_client_scope, chat_connection, chat_principal, signed_key_holder
from chat.selectors import chat_user_profile
from chat.services.users import (
    chat_user_create,
    chat_user_delete,
    chat_user_get_or_create,
    chat_user_update,
)
from platform_site.api.schema import ERROR, ERRORS


def _profile(data: dict[str, Any]) -> dict[str, Any]:
    """The validated profile fields, by their service names."""
    names = {"name": "name", "pictureUrl": "picture_url", "profile": "profile"}
    return {names[field]: value for field, value in data.items() if field in names}


class UserCollectionView(ChatView):
    # No key yet: this is where a client gets one.
    authentication_classes = []
    permissions_by_method = {"POST": [IssuesUserKeys]}
    # A chat whose operator signs the keys issues none (IssuesUserKeys).
    error_statuses = (401,)

    @extend_schema(
        summary="Create a user and its key",
        operation_id="chatCreateUser",
        request=UserCreateSerializer,
        responses={201: OpenApiTypes.OBJECT, 409: ERROR, **ERRORS},
    )
    @idempotent_create(scope=chat_client_scope)
    def post(self, request: Request, webhook_id: str) -> Response:
        serializer = UserCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        user, key = chat_user_create(
            connection=chat_connection(request), chat_id=data.get("id"), **_profile(data)
        )
        return Response({"user": user_chat_json(user), "key": key}, status=201)


class CurrentUserView(ChatView):
    permissions_by_method = {"GET": [IsChatUser], "PUT": [IsChatUser], "DELETE": [IsChatUser]}

    @extend_schema(
        summary="Get the key's user",
        operation_id="chatGetUser",
        responses={200: OpenApiTypes.OBJECT, **ERRORS},
    )
    def get(self, request: Request, webhook_id: str) -> Response:
        return Response(
            {"user": user_chat_json(chat_user_profile(user=chat_principal(request).user))}
        )

    @extend_schema(
        summary="Update the key's user",
        operation_id="chatUpdateUser",
        request=UserProfileSerializer,
        responses={200: OpenApiTypes.OBJECT, **ERRORS},
    )
    def put(self, request: Request, webhook_id: str) -> Response:
        serializer = UserProfileSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        user = chat_user_update(
            user=chat_user_profile(user=chat_principal(request).user),
            **_profile(serializer.validated_data),
        )
        return Response({"user": user_chat_json(user)})

    @extend_schema(
        summary="Delete the key's user, with their messages",
        operation_id="chatDeleteUser",
        responses={200: OpenApiTypes.OBJECT, **ERRORS},
    )
    def delete(self, request: Request, webhook_id: str) -> Response:
        chat_user_delete(user=chat_principal(request).user)
        return Response({})


class UserGetOrCreateView(ChatView):
    authentication_classes = [SignedUserKeyAuthentication]
    permissions_by_method = {"POST": [HoldsSignedKey]}

    @extend_schema(
        summary="Get the key's user, made on the spot if the key names none yet",
        description="201 when the user was made, 200 when it existed.",
        operation_id="chatGetOrCreateUser",
        request=UserProfileSerializer,
        responses={200: OpenApiTypes.OBJECT, 201: OpenApiTypes.OBJECT, **ERRORS},
    )
    @idempotent_create
    def post(self, request: Request, webhook_id: str) -> Response:
        serializer = UserProfileSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        holder = signed_key_holder(request)
        user, created = chat_user_get_or_create(
            connection=holder.connection,
            chat_id=holder.chat_user_id,
            **_profile(serializer.validated_data),
        )
        return Response({"user": user_chat_json(user)}, status=201 if created else 200)
