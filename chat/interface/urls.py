"""The chat interface under {chat_url}/{webhookId}: what a bot's end users call.

Caller-chosen ids of conversations and users may hold `/`, so those path
segments match anything (the views refuse what cannot be an id), and a longer
route comes before a shorter one it would otherwise be read as: the messages
of conversation `a/b` are at `conversations/a/b/messages`. The live stream's
`conversations/<id>/listen` is matched before these by chat/urls.py."""

from django.urls import path, re_path

from chat.authentication import AdminSecretAuthentication, SignedUserKeyAuthentication
from chat.interface.views.base import ChatHelloViewSet
from chat.interface.views.chat_events import ChatEventViewSet
from chat.interface.views.conversations import ChatConversationViewSet
from chat.interface.views.files import ChatFileViewSet
from chat.interface.views.messages import ChatMessageViewSet
from chat.interface.views.participants import ChatParticipantViewSet
from chat.interface.views.users import ChatUserViewSet

CONVERSATION = r"conversations/(?P<conversation_id>.+)"

# Included under chat/<str:webhook_id>/ by chat/urls.py.
urlpatterns = [
    path("hello", ChatHelloViewSet.as_view({"get": "hello"}), name="chat-hello"),
    # @botpress/chat's connect() calls GET {apiUrl}/hello/ (axios baseURL
    # `…/hello` and get("/")): the same view, left out of the OpenAPI document.
    path("hello/", ChatHelloViewSet.as_view({"get": "hello"}, schema=None)),
    # No key yet: this is where a client gets one.
    path(
        "users",
        ChatUserViewSet.as_view({"post": "create"}, authentication_classes=[]),
        name="chat-users",
    ),
    path(
        "users/me",
        ChatUserViewSet.as_view({"get": "me", "put": "update_me", "delete": "delete_me"}),
        name="chat-user-me",
    ),
    # A key whose user may not exist yet: this makes it.
    path(
        "users/get-or-create",
        ChatUserViewSet.as_view(
            {"post": "get_or_create"}, authentication_classes=[SignedUserKeyAuthentication]
        ),
        name="chat-user-get-or-create",
    ),
    # The admin secret has keys made: the official webchat's generateUserKey.
    path(
        "users/key",
        ChatUserViewSet.as_view(
            {"post": "key"}, authentication_classes=[AdminSecretAuthentication]
        ),
        name="chat-user-key",
    ),
    path(
        "conversations",
        ChatConversationViewSet.as_view({"post": "create", "get": "list"}),
        name="chat-conversations",
    ),
    path(
        "conversations/get-or-create",
        ChatConversationViewSet.as_view({"post": "get_or_create"}),
        name="chat-conversation-get-or-create",
    ),
    re_path(
        rf"^{CONVERSATION}/messages$",
        ChatMessageViewSet.as_view({"get": "list"}),
        name="chat-conversation-messages",
    ),
    re_path(
        rf"^{CONVERSATION}/participants$",
        ChatParticipantViewSet.as_view({"get": "list", "post": "create"}),
        name="chat-participants",
    ),
    re_path(
        rf"^{CONVERSATION}/participants/(?P<user_id>.+)$",
        ChatParticipantViewSet.as_view({"get": "retrieve", "delete": "destroy"}),
        name="chat-participant",
    ),
    re_path(
        rf"^{CONVERSATION}$",
        ChatConversationViewSet.as_view({"get": "retrieve", "delete": "destroy"}),
        name="chat-conversation",
    ),
    path("messages", ChatMessageViewSet.as_view({"post": "create"}), name="chat-messages"),
    path(
        "messages/<str:message_id>/feedback",
        ChatMessageViewSet.as_view({"put": "feedback_set", "delete": "feedback_remove"}),
        name="chat-message-feedback",
    ),
    path(
        "messages/<str:message_id>",
        ChatMessageViewSet.as_view({"get": "retrieve", "put": "update", "delete": "destroy"}),
        name="chat-message",
    ),
    path("files", ChatFileViewSet.as_view({"post": "create"}), name="chat-files"),
    path("events", ChatEventViewSet.as_view({"post": "create"}), name="chat-events"),
    path(
        "events/<str:event_id>",
        ChatEventViewSet.as_view({"get": "retrieve"}),
        name="chat-event",
    ),
]
