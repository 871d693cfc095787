from django.urls import include, path

from chat.interface.views.webchat_page import webchat_page

urlpatterns = [
    # The end users' page: the official webchat, bundled (webchat/).
    path("chat/<str:webhook_id>/webchat", webchat_page, name="chat-webchat"),
    # The live stream first: its route is the longest under a conversation.
    path("chat/<str:webhook_id>/", include("chat.live.urls")),
    path("chat/<str:webhook_id>/", include("chat.interface.urls")),
    path("", include("chat.runtime.urls")),
]
