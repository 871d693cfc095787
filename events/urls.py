from django.urls import path

from events.views import EventCollectionView

urlpatterns = [
    path("v1/chat/events", EventCollectionView.as_view(), name="events"),
]
