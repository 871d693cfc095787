from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from chat.interface.serializers import ChatFileCreateSerializer
from chat.interface.views.base import ChatInterfaceViewSet
from chat.permissions import IsChatUser
from chat.principals import chat_principal
from chat.services.files import chat_file_create
from files.answers import FileAnswerSerializer
from files.presenters import file_json
from files.signed_urls import download_url


class ChatFileViewSet(ChatInterfaceViewSet):
    permissions_by_action = {"create": [IsChatUser]}

    @extend_schema(
        summary="Make a file for the key's user to upload (the official webchat's createFile)",
        description=(
            "A file of the bot, under the key `webchat/{userId}/{key}`, public at its `url`"
            " (given at once) and not indexed. PUT its content to `uploadUrl`: exactly"
            " `size` bytes (at most CHAT_FILE_MAX_SIZE) with its `contentType`."
        ),
        operation_id="chatCreateFile",
        request=ChatFileCreateSerializer,
        responses={201: FileAnswerSerializer},
    )
    def create(self, request: Request, webhook_id: str) -> Response:
        serializer = ChatFileCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        file = chat_file_create(
            user=chat_principal(request).user,
            key=data["key"],
            size=data["size"],
            content_type=data.get("contentType"),
            tags=data["tags"],
            access_policies=data["accessPolicies"],
            expires_at=data.get("expiresAt"),
        )
        body = file_json(file, with_upload_url=True)
        body.setdefault("url", download_url(file))
        return Response({"file": body}, status=201)
