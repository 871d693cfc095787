from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from bots.models import User
from chat.authentication import USER_KEY_CHALLENGE
from chat.credentials import chat_user_for_key
from chat.interface.answers import (
    ChatUserAnswerSerializer,
    ChatUserCreatedAnswerSerializer,
    ChatUserKeySerializer,
)
from chat.interface.serializers import (
    UserCreateSerializer,
    UserKeySerializer,
    UserProfileSerializer,
    UserUpdateSerializer,
    user_data_sized,
)
from chat.interface.views.base import ChatInterfaceViewSet
from chat.keys import InvalidUserKey, signed_object_read, user_key_issue
from chat.models import ChatConnection
from chat.permissions import HoldsSignedKey, IsChatAdmin, IsChatUser, IssuesUserKeys
from chat.presenters import user_chat_json
from chat.principals import (
    chat_admin,
    chat_client_scope,
    chat_connection,
    chat_principal,
    signed_key_holder,
)
from chat.selectors.users import chat_user_profile
from chat.services.users import (
    chat_user_create,
    chat_user_get_or_create,
    chat_user_update,
    user_delete,
)
from platform_site.api.answers import Answers, EmptyAnswerSerializer
from platform_site.api.errors import Unauthorized
from platform_site.api.idempotency import idempotent_create
from platform_site.api.schema import ERROR


def _profile(data: dict[str, Any]) -> dict[str, Any]:
    """The validated profile fields, by their service names."""
    names = {"name": "name", "pictureUrl": "picture_url", "profile": "profile"}
    return {names[field]: value for field, value in data.items() if field in names}


def _user_data(data: dict[str, Any], connection: ChatConnection) -> dict[str, Any]:
    """`userData` by its service name, a signed token read with the chat's
    key: {} when it is not given."""
    if "userData" not in data:
        return {}
    value = data["userData"]
    if isinstance(value, str):
        try:
            value = signed_object_read(connection=connection, token=value)
        except InvalidUserKey as exc:
            raise ValidationError({"userData": [str(exc)]}) from None
        try:
            value = user_data_sized(value)
        except ValidationError as exc:
            raise ValidationError({"userData": exc.detail}) from None
    return {"data": value}


def _key_user_profile(request: Request) -> User:
    profile = chat_user_profile(user=chat_principal(request).user)
    if profile is None:  # deleted since the request was authenticated
        raise Unauthorized(
            "The user key names a user that does not exist",
            headers={"WWW-Authenticate": USER_KEY_CHALLENGE},
        )
    return profile


class ChatUserViewSet(ChatInterfaceViewSet):
    """The key's user. Three routes take other credentials than a user key
    (chat/interface/urls.py names their authenticators): `create`, where a
    client without a key gets one, `get_or_create`, whose key may name a
    user who does not exist yet, and `key`, where the holder of the admin
    secret has a key made for any user id."""

    answers = Answers(got_or_created=ChatUserAnswerSerializer)

    permissions_by_action = {
        "create": [IssuesUserKeys],
        "me": [IsChatUser],
        "update_me": [IsChatUser],
        "delete_me": [IsChatUser],
        "get_or_create": [HoldsSignedKey],
        "key": [IsChatAdmin],
    }

    def creates_chat_user(self, request: Request) -> bool:
        # `key` makes none: the user of its key is made by get-or-create.
        if self.action == "create":
            return True
        if self.action == "get_or_create":
            holder = signed_key_holder(request)
            user = chat_user_for_key(connection=holder.connection, chat_user_id=holder.chat_user_id)
            return user is None
        return False

    @extend_schema(
        summary="Create a user and its key",
        operation_id="chatCreateUser",
        request=UserCreateSerializer,
        # 401: a chat whose operator signs the keys issues none (IssuesUserKeys).
        responses={201: ChatUserCreatedAnswerSerializer, 401: ERROR, 409: ERROR},
    )
    @idempotent_create(scope=chat_client_scope)
    def create(self, request: Request, webhook_id: str) -> Response:
        serializer = UserCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        user, key = chat_user_create(
            connection=chat_connection(request),
            chat_id=data.get("id"),
            purgeable=True,
            **_profile(data),
        )
        return Response({"user": user_chat_json(user), "key": key}, status=201)

    @extend_schema(
        summary="Get the key's user",
        operation_id="chatGetUser",
        responses={200: ChatUserAnswerSerializer},
    )
    def me(self, request: Request, webhook_id: str) -> Response:
        return Response({"user": user_chat_json(_key_user_profile(request))})

    @extend_schema(
        summary="Update the key's user",
        operation_id="chatUpdateUser",
        request=UserUpdateSerializer,
        responses={200: ChatUserAnswerSerializer},
    )
    def update_me(self, request: Request, webhook_id: str) -> Response:
        serializer = UserUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        user = chat_user_update(
            user=_key_user_profile(request),
            **_profile(data),
            **_user_data(data, chat_connection(request)),
        )
        return Response({"user": user_chat_json(user)})

    @extend_schema(
        summary="Delete the key's user, with their messages",
        operation_id="chatDeleteUser",
        responses={200: EmptyAnswerSerializer},
    )
    def delete_me(self, request: Request, webhook_id: str) -> Response:
        user_delete(user=chat_principal(request).user)
        return Response({})

    @extend_schema(
        summary="Get the key's user, made on the spot if the key names none yet",
        description="201 when the user was made, 200 when it existed.",
        operation_id="chatGetOrCreateUser",
        request=UserProfileSerializer,
    )
    @idempotent_create
    def get_or_create(self, request: Request, webhook_id: str) -> Response:
        serializer = UserProfileSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        holder = signed_key_holder(request)
        user, created = chat_user_get_or_create(
            connection=holder.connection,
            chat_id=holder.chat_user_id,
            **_profile(serializer.validated_data),
        )
        return Response({"user": user_chat_json(user)}, status=201 if created else 200)

    @extend_schema(
        summary="Make a user's key (the official webchat's generateUserKey)",
        description=(
            "Needs `x-admin-secret`: the chat's encryption key, which signs user keys. "
            "The user need not exist yet (POST users/get-or-create makes it)."
        ),
        operation_id="chatGenerateUserKey",
        request=UserKeySerializer,
        responses={200: ChatUserKeySerializer},
    )
    def key(self, request: Request, webhook_id: str) -> Response:
        serializer = UserKeySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        key = user_key_issue(
            connection=chat_admin(request).connection,
            chat_user_id=data["id"],
            expires_at=data.get("expiresAt"),
        )
        return Response({"key": key})
