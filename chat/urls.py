from django.urls import path

from chat.views import HelloView, MessageCollectionView

urlpatterns = [
    path("chat/<str:webhook_id>/hello", HelloView.as_view(), name="chat-hello"),
    path("chat/<str:webhook_id>/messages", MessageCollectionView.as_view(), name="chat-messages"),
]
