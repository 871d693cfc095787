from django.conf import settings
from django.urls import path

from files.views import FileContentViewSet, FileSearchViewSet, FileViewSet

urlpatterns = [
    path("v1/files", FileViewSet.as_view({"put": "upsert", "get": "list"}), name="files"),
    # Before the routes of a file by key, which these paths would spell.
    path("v1/files/search", FileSearchViewSet.as_view({"get": "search"}), name="files-search"),
    path("v1/files/tags", FileSearchViewSet.as_view({"get": "tags"}), name="file-tags"),
    path(
        "v1/files/tags/<path:tag>/values",
        FileSearchViewSet.as_view({"get": "tag_values"}),
        name="file-tag-values",
    ),
    # Keys may hold slashes: a key that ends in /passages reads as that route.
    path(
        "v1/files/<path:file_id>/passages",
        FileViewSet.as_view({"get": "passages", "put": "passages_set"}),
        name="file-passages",
    ),
    path(
        "v1/files/<path:file_id>",
        FileViewSet.as_view({"get": "retrieve", "put": "update", "delete": "destroy"}),
        name="file",
    ),
    path(
        f"{settings.FILE_UPLOAD_PATH[1:]}<str:token>",
        FileContentViewSet.as_view({"put": "upload"}),
        name="upload",
    ),
    path(
        f"{settings.FILE_DOWNLOAD_PATH[1:]}<str:token>",
        FileContentViewSet.as_view({"get": "download"}),
        name="download",
    ),
]
