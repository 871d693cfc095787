from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from chat.authentication import UserKeyAuthentication
from chat.credentials import chat_connection_for_webhook
from chat.interface.answers import ChatHelloSerializer
from chat.openapi import CHAT_PATH_PARAMETERS
from platform_site.api.errors import ResourceNotFound
from platform_site.api.views import ApiViewSet


class ChatInterfaceViewSet(ApiViewSet):
    """A resource under {chat_url}/{webhook_id}: the connection is found
    first, so that an unknown webhook id is a 404 whatever the method or the
    credentials."""

    authentication_classes = [UserKeyAuthentication]
    path_parameters = CHAT_PATH_PARAMETERS

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        webhook_id = kwargs["webhook_id"]
        connection = chat_connection_for_webhook(webhook_id)
        if connection is None:
            raise ResourceNotFound(f"Chat {webhook_id!r} not found")
        request.chat_connection = connection  # type: ignore[attr-defined]
        super().initial(request, *args, **kwargs)

    def creates_chat_user(self, request: Request) -> bool:
        """Whether the request, authenticated, may make a chat user: it then
        counts against the limits on users made too (chat/throttles.py)."""
        return False


class ChatHelloViewSet(ChatInterfaceViewSet):
    authentication_classes = []
    permissions_by_action = {"hello": [AllowAny]}

    @extend_schema(
        summary="Check the chat interface",
        operation_id="chatHello",
        responses={200: ChatHelloSerializer},
    )
    def hello(self, request: Request, webhook_id: str) -> Response:
        return Response({"message": "Hello World!"})
