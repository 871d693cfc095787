from typing import Any

from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import FileResponse, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from files.answers import (
    FileAnswerSerializer,
    FilePageSerializer,
    FileTagPageSerializer,
    FileTagValuePageSerializer,
    PassagePageSerializer,
    SearchAnswerSerializer,
)
from files.models import FILE_KEY_MAX_LENGTH
from files.passage_data import PassageData
from files.presenters import file_json, passages_page_body, search_hit_json
from files.selectors.downloads import file_download_open
from files.selectors.files import file_get, files_list
from files.selectors.passages import passages_page
from files.selectors.search import SearchRequest, files_search
from files.selectors.tags import file_tag_values_page, file_tags_page
from files.serializers import (
    SEARCH_CONTEXT_DEPTH_MAX,
    SEARCH_LIMIT_DEFAULT,
    SEARCH_LIMIT_MAX,
    SEARCH_QUERY_MAX_LENGTH,
    FileMetadataSerializer,
    FileSearchQuery,
    FileUpsertSerializer,
    PassagesSetSerializer,
)
from files.services.file_uploads import file_upload_receive
from files.services.files import (
    file_delete,
    file_metadata_update,
    file_passages_set,
    file_upsert,
)
from files.signed_urls import DownloadGrant, UploadGrant, download_grant, upload_grant
from files.streaming import content_chunks
from files.throttles import SignedUrlRateLimit
from platform_site.api.answers import Answers
from platform_site.api.database import database_release
from platform_site.api.permissions import CanReadRuntime, CanWriteFiles
from platform_site.api.principals import bot_principal
from platform_site.api.query import validate_query
from platform_site.api.schema import NEXT_TOKEN, PAGE_SIZE, TAGS
from platform_site.api.token_authentication import BotTokenAuthentication
from platform_site.api.views import ApiViewSet
from platform_site.foundation.pagination import page_request
from platform_site.foundation.tags import tag_conditions, tag_filters

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
SEARCH_TAGS = OpenApiParameter(
    "tags",
    {"type": "object", "additionalProperties": {"type": "string"}},
    style="deepObject",
    explode=True,
    description=(
        "Files whose tags match: `tags[<key>]=<value>` or `tags.<key>=<value>` (a key"
        " repeated: any of its values), `tags.<key>.not=<value>` to exclude; or `tags` as a"
        ' URL-encoded JSON object of a value, an array of values (any of them) or {"not":'
        " value or values} per key"
    ),
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


# The model field of each field of the metadata update's body.
_METADATA_FIELDS = {
    "tags": "tags",
    "metadata": "metadata",
    "accessPolicies": "access_policies",
    "expiresAt": "expires_at",
}


class EncodedJSONResponse(HttpResponse):
    """A 200 whose body is JSON already encoded: sent as it is, not rendered.

    Errors still go through the API's exception handler and renderer; only a
    view's success answer takes this path."""

    def __init__(self, body: bytes) -> None:
        super().__init__(body, content_type="application/json")


class FileViewSet(ApiViewSet):
    """A bot's files and their passages, by the bot's token."""

    answers = Answers(one=FileAnswerSerializer, page=FilePageSerializer)

    authentication_classes = [BotTokenAuthentication]
    path_parameters = [FILE_ID_OR_KEY]
    permissions_by_action = {
        "list": [CanReadRuntime],
        "upsert": [CanWriteFiles],
        "retrieve": [CanReadRuntime],
        "update": [CanWriteFiles],
        "destroy": [CanWriteFiles],
        "passages": [CanReadRuntime],
        "passages_set": [CanWriteFiles],
    }

    @extend_schema(
        summary="List the bot's files, newest first",
        operation_id="listFiles",
        parameters=[TAGS, NEXT_TOKEN, PAGE_SIZE],
    )
    def list(self, request: Request) -> Response:
        page = files_list(
            bot=bot_principal(request).bot,
            page=page_request(request.query_params),
            tags=tag_filters(request.query_params),
        )
        return Response(page.json("files", file_json))

    @extend_schema(
        summary="Create or replace a file by key; answers its upload URL",
        operation_id="upsertFile",
        request=FileUpsertSerializer,
        responses={200: FileAnswerSerializer},
    )
    def upsert(self, request: Request) -> Response:
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
        summary="Get a file by id or key",
        operation_id="getFile",
    )
    def retrieve(self, request: Request, file_id: str) -> Response:
        file = file_get(bot=bot_principal(request).bot, id_or_key=file_id)
        return Response({"file": file_json(file)})

    @extend_schema(
        summary="Update a file's tags, metadata, access policies or expiry (not its content)",
        operation_id="updateFileMetadata",
        request=FileMetadataSerializer,
    )
    def update(self, request: Request, file_id: str) -> Response:
        serializer = FileMetadataSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        changes = {field: data[name] for name, field in _METADATA_FIELDS.items() if name in data}
        file = file_get(bot=bot_principal(request).bot, id_or_key=file_id)
        file = file_metadata_update(file=file, changes=changes)
        return Response({"file": file_json(file)})

    @extend_schema(
        summary="Delete a file, its passages and its content",
        operation_id="deleteFile",
    )
    def destroy(self, request: Request, file_id: str) -> Response:
        file_delete(file=file_get(bot=bot_principal(request).bot, id_or_key=file_id))
        return Response({})

    @extend_schema(
        summary="List a file's passages",
        operation_id="listFilePassages",
        parameters=[PASSAGES_LIMIT, PASSAGES_PAGE_SIZE, NEXT_TOKEN],
        responses={200: PassagePageSerializer},
    )
    def passages(self, request: Request, file_id: str) -> EncodedJSONResponse:
        principal = bot_principal(request)
        page = page_request(request.query_params, size_param="limit")
        result = passages_page(bot=principal.bot, id_or_key=file_id, page=page)
        # The database encoded the page: its bytes go out without DRF's renderer.
        return EncodedJSONResponse(
            passages_page_body(passages=result.passages, next_token=result.next_token)
        )

    @extend_schema(
        summary="Set a file's passages directly",
        operation_id="setFilePassages",
        request=PassagesSetSerializer,
        responses={200: FileAnswerSerializer},
    )
    def passages_set(self, request: Request, file_id: str) -> Response:
        serializer = PassagesSetSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        file = file_get(bot=bot_principal(request).bot, id_or_key=file_id)
        passages = [_passage_data(item) for item in serializer.validated_data["passages"]]
        file = file_passages_set(file=file, passages=passages)
        return Response({"file": file_json(file)})


class FileSearchViewSet(ApiViewSet):
    """Searching a bot's passages, and the tags its files carry, by the bot's token."""

    authentication_classes = [BotTokenAuthentication]
    permissions_by_action = {
        "search": [CanReadRuntime],
        "tags": [CanReadRuntime],
        "tag_values": [CanReadRuntime],
    }

    @extend_schema(
        summary="Search the bot's passages for a natural-language query, best first",
        description=(
            "Ranked by full-text search (bm25, english stemming; the words of the query are"
            " alternatives), by meaning where semantic search is on, and fused by reciprocal"
            " rank: `score` is 1 for a passage first"
            " in every ranking, lower further down. Not paginated: `limit` passages at most."
        ),
        operation_id="searchFiles",
        parameters=[
            OpenApiParameter(
                "query",
                {"type": "string", "minLength": 1, "maxLength": SEARCH_QUERY_MAX_LENGTH},
                required=True,
                description="The question, in natural language",
            ),
            SEARCH_TAGS,
            OpenApiParameter(
                "contextDepth",
                {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": SEARCH_CONTEXT_DEPTH_MAX,
                    "default": 1,
                },
                description="Passages before and after each match added to its content",
            ),
            OpenApiParameter(
                "limit",
                {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": SEARCH_LIMIT_MAX,
                    "default": SEARCH_LIMIT_DEFAULT,
                },
                description="Passages answered at most",
            ),
            *(
                OpenApiParameter(name, {"type": "boolean", "default": False}, description=text)
                for name, text in (
                    (
                        "consolidate",
                        "One passage per file: its matches in file order, under their headings",
                    ),
                    ("includeBreadcrumb", "Each passage's title and subtitle before its content"),
                    ("withContext", "The passages around each match in `context`"),
                )
            ),
        ],
        responses={200: SearchAnswerSerializer},
    )
    def search(self, request: Request) -> Response:
        query = validate_query(FileSearchQuery, request.query_params)
        hits = files_search(
            bot=bot_principal(request).bot,
            request=SearchRequest(
                query=query["query"],
                tags=tag_conditions(request.query_params),
                context_depth=query["contextDepth"],
                limit=query["limit"],
                consolidate=query["consolidate"] == "true",
                include_breadcrumb=query["includeBreadcrumb"] == "true",
                with_context=query["withContext"] == "true",
            ),
        )
        return Response({"passages": [search_hit_json(hit) for hit in hits]})

    @extend_schema(
        summary="List the tags the bot's files carry, in order",
        operation_id="listFileTags",
        parameters=[NEXT_TOKEN, PAGE_SIZE],
        responses={200: FileTagPageSerializer},
    )
    def tags(self, request: Request) -> Response:
        page = file_tags_page(
            bot=bot_principal(request).bot, page=page_request(request.query_params)
        )
        return Response(page.json("tags", str))

    @extend_schema(
        summary="List the values a tag takes on the bot's files, in order",
        operation_id="listFileTagValues",
        parameters=[
            OpenApiParameter("tag", {"type": "string", "minLength": 1}, OpenApiParameter.PATH),
            NEXT_TOKEN,
            PAGE_SIZE,
        ],
        responses={200: FileTagValuePageSerializer},
    )
    def tag_values(self, request: Request, tag: str) -> Response:
        page = file_tag_values_page(
            bot=bot_principal(request).bot, tag=tag, page=page_request(request.query_params)
        )
        return Response(page.json("values", str))


def _passage_data(item: dict[str, Any]) -> PassageData:
    meta = item.get("meta", {})
    return PassageData(
        content=item["content"],
        type=meta.get("type", "chunk"),
        subtype=meta.get("subtype", "paragraph"),
        page_number=meta.get("pageNumber"),
        source_url=meta.get("sourceUrl", ""),
        position=meta.get("position"),
    )


class FileContentViewSet(ApiViewSet):
    """A file's content at its signed upload URL and its signed `url`: the URL
    is the credential, so no Authorization."""

    authentication_classes: list[type] = []
    throttle_classes = [SignedUrlRateLimit]
    permissions_by_action = {"upload": [AllowAny], "download": [AllowAny]}
    path_parameters = [SIGNED_TOKEN]
    error_statuses = (403, 404)

    def signed_grant(self, token: str) -> UploadGrant | DownloadGrant:
        """What the URL's token grants, for SignedUrlRateLimit as for the action."""
        return upload_grant(token) if self.action == "upload" else download_grant(token)

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
        responses={200: FileAnswerSerializer},
    )
    def upload(self, request: Request, token: str) -> Response:
        grant = upload_grant(token)
        length = int(request.META.get("CONTENT_LENGTH") or 0)
        file = file_upload_receive(
            grant=grant,
            body=request.stream,
            length=length,
            content_type=request.META.get("CONTENT_TYPE", ""),
        )
        return Response({"file": file_json(file)})

    @extend_schema(
        summary="Download a file's content (its url)",
        description="A file's `url`: signed, so no Authorization.",
        operation_id="downloadFileContent",
        responses={(200, "*/*"): OpenApiTypes.BINARY},
    )
    def download(self, request: Request, token: str) -> FileResponse:
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
