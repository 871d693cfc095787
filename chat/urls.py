from django.urls import include, path

urlpatterns = [
    # The live stream first: its route is the longest under a conversation.
    path("chat/<str:webhook_id>/", include("chat.live.urls")),
    path("chat/<str:webhook_id>/", include("chat.interface.urls")),
    path("", include("chat.runtime.urls")),
]
