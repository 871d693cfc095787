from django.urls import path, re_path

from chat.live.views.initialize import webchat_initialize
from chat.live.views.listen import conversation_listen

# Included under chat/<str:webhook_id>/ by chat/urls.py, before the interface's
# routes. A conversation's chat id may hold `/`.
urlpatterns = [
    # The official webchat's start: its user, conversation and live stream.
    path("initialize", webchat_initialize, name="chat-webchat-initialize"),
    re_path(
        r"^conversations/(?P<conversation_id>.+)/listen$",
        conversation_listen,
        name="chat-conversation-listen",
    ),
]
