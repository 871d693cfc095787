from django.conf import settings
from django.urls import path

from files.views import (
    FileCollectionView,
    FileDetailView,
    FileDownloadView,
    FilePassagesView,
    FileUploadView,
)

urlpatterns = [
    path("v1/files", FileCollectionView.as_view(), name="files"),
    # Keys may hold slashes: a key that ends in /passages reads as that route.
    path("v1/files/<path:file_id>/passages", FilePassagesView.as_view(), name="file-passages"),
    path("v1/files/<path:file_id>", FileDetailView.as_view(), name="file"),
    path(f"{settings.FILE_UPLOAD_PATH[1:]}<str:token>", FileUploadView.as_view(), name="upload"),
    path(
        f"{settings.FILE_DOWNLOAD_PATH[1:]}<str:token>",
        FileDownloadView.as_view(),
        name="download",
    ),
]
