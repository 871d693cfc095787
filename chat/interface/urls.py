"""The chat interface under {chat_url}/{webhookId}: what a bot's end users call.

Caller-chosen ids of conversations and users may hold `/`, so those path
segments match anything (the views refuse what cannot be an id), and a longer
route comes before a shorter one it would otherwise be read as: the messages
of conversation `a/b` are at `conversations/a/b/messages`. The live stream's
`conversations/<id>/listen` is matched before these by chat/urls.py."""

from django.urls import path, re_path

from chat.interface.base import HelloView
from chat.interface.conversations import (
    ConversationCollectionView,
    ConversationDetailView,
    ConversationGetOrCreateView,
)
from chat.interface.events import ChatEventCollectionView, ChatEventDetailView
from chat.interface.messages import (
    ConversationMessagesView,
    MessageCollectionView,
    MessageDetailView,
)
from chat.interface.participants import ParticipantCollectionView, ParticipantDetailView
from chat.interface.users import CurrentUserView, UserCollectionView, UserGetOrCreateView

CONVERSATION = r"conversations/(?P<conversation_id>.+)"

# Included under chat/<str:webhook_id>/ by chat/urls.py.
urlpatterns = [
    path("hello", HelloView.as_view(), name="chat-hello"),
    # @botpress/chat's connect() calls GET {apiUrl}/hello/ (axios baseURL
    # `…/hello` and get("/")): the same view, left out of the OpenAPI document.
    path("hello/", HelloView.as_view(schema=None)),
    path("users", UserCollectionView.as_view(), name="chat-users"),
    path("users/me", CurrentUserView.as_view(), name="chat-user-me"),
    path("users/get-or-create", UserGetOrCreateView.as_view(), name="chat-user-get-or-create"),
    path("conversations", ConversationCollectionView.as_view(), name="chat-conversations"),
    path(
        "conversations/get-or-create",
        ConversationGetOrCreateView.as_view(),
        name="chat-conversation-get-or-create",
    ),
    re_path(
        rf"^{CONVERSATION}/messages$",
        ConversationMessagesView.as_view(),
        name="chat-conversation-messages",
    ),
    re_path(
        rf"^{CONVERSATION}/participants$",
        ParticipantCollectionView.as_view(),
        name="chat-participants",
    ),
    re_path(
        rf"^{CONVERSATION}/participants/(?P<user_id>.+)$",
        ParticipantDetailView.as_view(),
        name="chat-participant",
    ),
    re_path(rf"^{CONVERSATION}$", ConversationDetailView.as_view(), name="chat-conversation"),
    path("messages", MessageCollectionView.as_view(), name="chat-messages"),
    path("messages/<str:message_id>", MessageDetailView.as_view(), name="chat-message"),
    path("events", ChatEventCollectionView.as_view(), name="chat-events"),
    path("events/<str:event_id>", ChatEventDetailView.as_view(), name="chat-event"),
]
