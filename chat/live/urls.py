from django.urls import re_path

from chat.live.views import conversation_listen

# Included under chat/<str:webhook_id>/ by chat/urls.py, before the interface's
# routes. A conversation's chat id may hold `/`.
urlpatterns = [
    re_path(
        r"^conversations/(?P<conversation_id>.+)/listen$",
        conversation_listen,
        name="chat-conversation-listen",
    ),
]
