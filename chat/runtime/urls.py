"""The runtime API's chat routes (/v1/chat/messages, conversations, users): what a bot calls."""

from django.urls import path

from chat.runtime.views import (
    ConversationCollectionView,
    ConversationDetailView,
    MessageCollectionView,
    MessageDetailView,
    MessageGetOrCreateView,
    UserCollectionView,
    UserDetailView,
)

# Included at the root by chat/urls.py: full paths.
urlpatterns = [
    path("v1/chat/messages", MessageCollectionView.as_view(), name="runtime-messages"),
    path(
        "v1/chat/messages/get-or-create",
        MessageGetOrCreateView.as_view(),
        name="runtime-message-get-or-create",
    ),
    path("v1/chat/messages/<str:message_id>", MessageDetailView.as_view(), name="runtime-message"),
    path(
        "v1/chat/conversations",
        ConversationCollectionView.as_view(),
        name="runtime-conversations",
    ),
    path(
        "v1/chat/conversations/<str:conversation_id>",
        ConversationDetailView.as_view(),
        name="runtime-conversation",
    ),
    path("v1/chat/users", UserCollectionView.as_view(), name="runtime-users"),
    path("v1/chat/users/<str:user_id>", UserDetailView.as_view(), name="runtime-user"),
]
