"""The runtime API's chat routes (/v1/chat/messages, conversations, users): what a bot calls."""

from django.urls import path

from chat.runtime.views.conversations import ConversationViewSet
from chat.runtime.views.messages import MessageViewSet
from chat.runtime.views.users import UserViewSet

# Included at the root by chat/urls.py: full paths.
urlpatterns = [
    path(
        "v1/chat/messages",
        MessageViewSet.as_view({"post": "create", "get": "list"}),
        name="runtime-messages",
    ),
    path(
        "v1/chat/messages/get-or-create",
        MessageViewSet.as_view({"post": "get_or_create"}),
        name="runtime-message-get-or-create",
    ),
    path(
        "v1/chat/messages/<str:message_id>",
        MessageViewSet.as_view({"get": "retrieve"}),
        name="runtime-message",
    ),
    path(
        "v1/chat/conversations",
        ConversationViewSet.as_view({"get": "list"}),
        name="runtime-conversations",
    ),
    path(
        "v1/chat/conversations/<str:conversation_id>",
        ConversationViewSet.as_view({"get": "retrieve"}),
        name="runtime-conversation",
    ),
    path("v1/chat/users", UserViewSet.as_view({"get": "list"}), name="runtime-users"),
    path(
        "v1/chat/users/<str:user_id>",
        UserViewSet.as_view({"get": "retrieve"}),
        name="runtime-user",
    ),
]
