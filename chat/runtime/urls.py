"""The runtime API's chat routes (/v1/chat/messages, conversations and their
participants, users, states, analytics): what a bot calls."""

from django.urls import path

from chat.runtime.views.analytics import RuntimeAnalyticsViewSet
from chat.runtime.views.conversations import RuntimeConversationViewSet
from chat.runtime.views.messages import RuntimeMessageViewSet
from chat.runtime.views.participants import RuntimeParticipantViewSet
from chat.runtime.views.states import RuntimeStateViewSet
from chat.runtime.views.users import RuntimeUserViewSet

# Included at the root by chat/urls.py: full paths.
urlpatterns = [
    path(
        "v1/chat/messages",
        RuntimeMessageViewSet.as_view({"post": "create", "get": "list"}),
        name="runtime-messages",
    ),
    path(
        "v1/chat/messages/get-or-create",
        RuntimeMessageViewSet.as_view({"post": "get_or_create"}),
        name="runtime-message-get-or-create",
    ),
    path(
        "v1/chat/messages/<str:message_id>",
        RuntimeMessageViewSet.as_view({"get": "retrieve", "put": "update", "delete": "destroy"}),
        name="runtime-message",
    ),
    path(
        "v1/chat/conversations",
        RuntimeConversationViewSet.as_view({"post": "create", "get": "list"}),
        name="runtime-conversations",
    ),
    path(
        "v1/chat/conversations/get-or-create",
        RuntimeConversationViewSet.as_view({"post": "get_or_create"}),
        name="runtime-conversation-get-or-create",
    ),
    path(
        "v1/chat/conversations/<str:conversation_id>",
        RuntimeConversationViewSet.as_view(
            {"get": "retrieve", "put": "update", "delete": "destroy"}
        ),
        name="runtime-conversation",
    ),
    path(
        "v1/chat/conversations/<str:conversation_id>/participants",
        RuntimeParticipantViewSet.as_view({"get": "list", "post": "create"}),
        name="runtime-participants",
    ),
    path(
        "v1/chat/conversations/<str:conversation_id>/participants/<str:user_id>",
        RuntimeParticipantViewSet.as_view({"get": "retrieve", "delete": "destroy"}),
        name="runtime-participant",
    ),
    path(
        "v1/chat/users",
        RuntimeUserViewSet.as_view({"post": "create", "get": "list"}),
        name="runtime-users",
    ),
    path(
        "v1/chat/users/get-or-create",
        RuntimeUserViewSet.as_view({"post": "get_or_create"}),
        name="runtime-user-get-or-create",
    ),
    path(
        "v1/chat/users/<str:user_id>",
        RuntimeUserViewSet.as_view({"get": "retrieve", "put": "update", "delete": "destroy"}),
        name="runtime-user",
    ),
    path(
        "v1/chat/analytics",
        RuntimeAnalyticsViewSet.as_view({"post": "track"}),
        name="runtime-analytics",
    ),
    path(
        "v1/chat/states/<str:type>/<str:id>/<str:name>",
        RuntimeStateViewSet.as_view(
            {"get": "retrieve", "post": "upsert", "patch": "partial_update"}
        ),
        name="runtime-state",
    ),
    path(
        "v1/chat/states/<str:type>/<str:id>/<str:name>/get-or-set",
        RuntimeStateViewSet.as_view({"post": "get_or_set"}),
        name="runtime-state-get-or-set",
    ),
    path(
        "v1/chat/states/<str:type>/<str:id>/<str:name>/expiry",
        RuntimeStateViewSet.as_view({"post": "expiry"}),
        name="runtime-state-expiry",
    ),
]
