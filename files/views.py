from typing import Any

from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from bots.authentication import BotTokenAuthentication
from bots.permissions import CanReadRuntime, CanWriteFiles
from bots.principals import bot_principal
from files.downloads import content_chunks, file_download_open
from files.models import FILE_KEY_MAX_LENGTH
from files.passage_data import PassageData
from files.passage_json import EncodedJSONResponse
from files.presenters import file_json
from files.selectors import file_get, files_list, passages_page
from files.serializers import FileMetadataSerializer, FileUpsertSerializer, PassagesSetSerializer
from files.services import file_delete, file_metadata_update, file_passages_set, file_upsert
from files.signed_urls import download_grant, upload_grant
from files.throttles import SignedUrlRateLimit
from files.uploads import file_upload_receive
from platform_site.api.database import database_release
from platform_site.api.pagination import page_request
from platform_site.api.schema import ERRORS, NEXT_TOKEN, PAGE_SIZE, TAGS
from platform_site.api.tags import tag_filters
from platform_site.api.views import ApiView

FILE_ID_OR_KEY = OpenApiParameter(
    "file_id",
    {"type": "string", "pattern": f"^[^\\x00]{{1,{FILE_KEY_MAX_LENGTH}}}$"},
    OpenApiParameter.PATH,
    description="A file id (file_…) or a file key, which may hold slashes",
)
SIGNED_TOKEN = OpenApiParameter(
    "token",
    {"type": "string", "pattern": r"^[^/\x00]+$"},
    OpenApiParameter.PATH,
    description="The signed part of the URL; one altered or expired is 403",
)
PASSAGES_LIMIT = OpenApiParameter(
    "limit",
    {
        "type": "integer",
        "minimum": 1,
        "maximum": settings.PAGE_SIZE_MAX,
        "default": settings.PAGE_SIZE_DEFAULT,
    },
    description="Passages per page",
)
# Not read, so not checked, when `limit` is given: `limit` wins (the
# extension says so to machines, such as .ci/schemathesis_hooks.py).
PASSAGES_PAGE_SIZE = OpenApiParameter(
    "pageSize",
    PAGE_SIZE.type,
    description="Passages per page, where no limit is given; ignored (unchecked) beside limit",
    extensions={"x-ignored-with": "limit"},
)


class FileCollectionView(ApiView):
    authentication_classes = [BotTokenAuthentication]
    permissions_by_method = {"PUT": [CanWriteFiles], "GET": [CanReadRuntime]}

    @extend_schema(
        summary="Create or replace a file by key; answers its upload URL",
        operation_id="upsertFile",
        request=FileUpsertSerializer,
        responses={200: OpenApiTypes.OBJECT, **ERRORS},
    )
    def put(self, request: Request) -> Response:
        serializer = FileUpsertSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        chunking = data.get("indexing", {}).get("configuration", {}).get("chunking", {})
        file = file_upsert(
            bot=bot_principal(request).bot,
            key=data["key"],
            size=data["size"],
            content_type=data.get("contentType"),
            index=data["index"],
            tags=data["tags"],
            access_policies=data["accessPolicies"],
            metadata=data["metadata"],
            expires_at=data.get("expiresAt"),
            max_chunk_length=chunking.get("maximumChunkLength"),
            public_content_immediately_accessible=data["publicContentImmediatelyAccessible"],
        )
        return Response({"file": file_json(file, with_upload_url=True)})

    @extend_schema(
        summary="List the bot's files, newest first",
        operation_id="listFiles",
        parameters=[TAGS, NEXT_TOKEN, PAGE_SIZE],
        responses={200: OpenApiTypes.OBJECT, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        page = files_list(
            bot=bot_principal(request).bot,
            page=page_request(request.query_params),
            tags=tag_filters(request.query_params),
        )
        return Response({"files": [file_json(f) for f in page.items], "meta": page.meta()})


class FileDetailView(ApiView):
    authentication_classes = [BotTokenAuthentication]
    path_parameters = [FILE_ID_OR_KEY]
    permissions_by_method = {
        "GET": [CanReadRuntime],
        "PUT": [CanWriteFiles],
        "DELETE": [CanWriteFiles],
    }

    @extend_schema(
        summary="Get a file by id or key",
        operation_id="getFile",
        responses={200: OpenApiTypes.OBJECT, **ERRORS},
    )
    def get(self, request: Request, file_id: str) -> Response:
        file = file_get(bot=bot_principal(request).bot, id_or_key=file_id)
        return Response({"file": file_json(file)})

    @extend_schema(
        summary="Update a file's tags, metadata, access policies or expiry (not its content)",
        operation_id="updateFileMetadata",
        request=FileMetadataSerializer,
        responses={200: OpenApiTypes.OBJECT, **ERRORS},
    )
    def put(self, request: Request, file_id: str) -> Response:
        serializer = FileMetadataSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        file = file_get(bot=bot_principal(request).bot, id_or_key=file_id)
        file = file_metadata_update(file=file, changes=_metadata_changes(serializer.validated_data))
        return Response({"file": file_json(file)})

    @extend_schema(
        summary="Delete a file, its passages and its content",
        operation_id="deleteFile",
        responses={200: OpenApiTypes.OBJECT, **ERRORS},
    )
    def delete(self, request: Request, file_id: str) -> Response:
        file_delete(file=file_get(bot=bot_principal(request).bot, id_or_key=file_id))
        return Response({})


def _metadata_changes(data: dict[str, Any]) -> dict[str, Any]:
    fields = {
        "tags": "tags",
        "metadata": "metadata",
        "accessPolicies": "access_policies",
        "expiresAt": "expires_at",
    }
    return {model_field: data[name] for name, model_field in fields.items() if name in data}


class FilePassagesView(ApiView):
    authentication_classes = [BotTokenAuthentication]
    path_parameters = [FILE_ID_OR_KEY]
    permissions_by_method = {"GET": [CanReadRuntime], "PUT": [CanWriteFiles]}

    @extend_schema(
        summary="List a file's passages",
        operation_id="listFilePassages",
        parameters=[PASSAGES_LIMIT, PASSAGES_PAGE_SIZE, NEXT_TOKEN],
        responses={200: OpenApiTypes.OBJECT, **ERRORS},
    )
    def get(self, request: Request, file_id: str) -> EncodedJSONResponse:
        principal = bot_principal(request)
        page = page_request(request.query_params, size_param="limit")
        result = passages_page(bot=principal.bot, id_or_key=file_id, page=page)
        # The database encoded the page: its bytes go out without DRF's renderer.
        return EncodedJSONResponse(result.body())

    @extend_schema(
        summary="Set a file's passages directly",
        operation_id="setFilePassages",
        request=PassagesSetSerializer,
        responses={200: OpenApiTypes.OBJECT, **ERRORS},
    )
    def put(self, request: Request, file_id: str) -> Response:
        serializer = PassagesSetSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        file = file_get(bot=bot_principal(request).bot, id_or_key=file_id)
        passages = [
            PassageData(
                content=item["content"],
                type=item.get("meta", {}).get("type", "chunk"),
                subtype=item.get("meta", {}).get("subtype", "paragraph"),
                page_number=item.get("meta", {}).get("pageNumber"),
                source_url=item.get("meta", {}).get("sourceUrl", ""),
                position=item.get("meta", {}).get("position"),
            )
            for item in serializer.validated_data["passages"]
        ]
        file = file_passages_set(file=file, passages=passages)
        return Response({"file": file_json(file)})


class FileUploadView(ApiView):
    """The signed upload URL: the URL is the credential, so no Authorization."""

    authentication_classes: list[type] = []
    throttle_classes = [SignedUrlRateLimit]
    signed_grant = staticmethod(upload_grant)
    permissions_by_method = {"PUT": [AllowAny]}
    path_parameters = [SIGNED_TOKEN]
    error_statuses = (403, 404)

    @extend_schema(
        summary="Upload a file's content (the uploadUrl of PUT /v1/files)",
        description=(
            "The raw bytes of the file, with no Authorization header: exactly the `size` the"
            " file announced, with a Content-Type equal to its `contentType`. Bytes that do"
            " not fit (or that are not of the type they claim, for formats with a signature)"
            " fail the upload with the reason (400); the URL can be used again until it"
            " expires, or until the file is upserted again (403)."
        ),
        operation_id="uploadFileContent",
        request={"*/*": OpenApiTypes.BINARY},
        responses={200: OpenApiTypes.OBJECT, **ERRORS},
    )
    def put(self, request: Request, token: str) -> Response:
        grant = upload_grant(token)
        length = int(request.META.get("CONTENT_LENGTH") or 0)
        file = file_upload_receive(
            grant=grant,
            body=request.stream,
            length=length,
            content_type=request.META.get("CONTENT_TYPE", ""),
        )
        return Response({"file": file_json(file)})


class FileDownloadView(ApiView):
    """A file's `url`: signed, so no Authorization."""

    authentication_classes: list[type] = []
    throttle_classes = [SignedUrlRateLimit]
    signed_grant = staticmethod(download_grant)
    permissions_by_method = {"GET": [AllowAny]}
    path_parameters = [SIGNED_TOKEN]
    error_statuses = (403, 404)

    @extend_schema(
        summary="Download a file's content (its url)",
        operation_id="downloadFileContent",
        responses={(200, "*/*"): OpenApiTypes.BINARY, **ERRORS},
    )
    def get(self, request: Request, token: str) -> FileResponse:
        download = file_download_open(grant=download_grant(token))
        database_release()
        response = FileResponse(
            download.content,
            content_type=download.content_type,
            filename=download.filename,
            as_attachment=not download.inline,
        )
        if isinstance(request._request, ASGIRequest):
            # The headers (length, type, disposition) stay those of the file.
            response.streaming_content = content_chunks(download.content)
        # Even shown inline, the content runs no script in this origin.
        response["Content-Security-Policy"] = "sandbox"
        response["X-Content-Type-Options"] = "nosniff"
        return response
