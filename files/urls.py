from django.urls import path

from files.views import FilePassagesView

urlpatterns = [
    path("v1/files/<path:file_id>/passages", FilePassagesView.as_view(), name="file-passages"),
]
