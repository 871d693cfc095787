"""The runtime API's chat routes (/v1/chat/messages, conversations and their
participants, users, states, analytics): what a bot calls."""

from django.urls import path

from chat.runtime.views.analytics import AnalyticsViewSet
from chat.runtime.views.conversations import ConversationViewSet
from chat.runtime.views.messages import MessageViewSet
from chat.runtime.views.participants import ParticipantViewSet
from chat.runtime.views.states import StateViewSet
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
        MessageViewSet.as_view({"get": "retrieve", "put": "update", "delete": "destroy"}),
        name="runtime-message",
    ),
    path(
        "v1/chat/conversations",
        ConversationViewSet.as_view({"post": "create", "get": "list"}),
        name="runtime-conversations",
    ),
    path(
        "v1/chat/conversations/get-or-create",
        ConversationViewSet.as_view({"post": "get_or_create"}),
        name="runtime-conversation-get-or-create",
    ),
    path(
        "v1/chat/conversations/<str:conversation_id>",
        ConversationViewSet.as_view({"get": "retrieve", "put": "update", "delete": "destroy"}),
        name="runtime-conversation",
    ),
    path(
        "v1/chat/conversations/<str:conversation_id>/participants",
        ParticipantViewSet.as_view({"get": "list", "post": "create"}),
        name="runtime-participants",
    ),
    path(
        "v1/chat/conversations/<str:conversation_id>/participants/<str:user_id>",
        ParticipantViewSet.as_view({"get": "retrieve", "delete": "destroy"}),
        name="runtime-participant",
    ),
    path(
        "v1/chat/users",
        UserViewSet.as_view({"post": "create", "get": "list"}),
        name="runtime-users",
    ),
    path(
        "v1/chat/users/get-or-create",
        UserViewSet.as_view({"post": "get_or_create"}),
        name="runtime-user-get-or-create",
    ),
    path(
        "v1/chat/users/<str:user_id>",
        UserViewSet.as_view({"get": "retrieve", "put": "update", "delete": "destroy"}),
        name="runtime-user",
    ),
    path(
        "v1/chat/analytics",
        AnalyticsViewSet.as_view({"post": "track"}),
        name="runtime-analytics",
    ),
    path(
        "v1/chat/states/<str:type>/<str:id>/<str:name>",
        StateViewSet.as_view({"get": "retrieve", "post": "upsert", "patch": "partial_update"}),
        name="runtime-state",
    ),
    path(
        "v1/chat/states/<str:type>/<str:id>/<str:name>/get-or-set",
        StateViewSet.as_view({"post": "get_or_set"}),
        name="runtime-state-get-or-set",
    ),
    path(
        "v1/chat/states/<str:type>/<str:id>/<str:name>/expiry",
        StateViewSet.as_view({"post": "expiry"}),
        name="runtime-state-expiry",
    ),
]
