from django.urls import path

from events.views import EventCollectionView, EventDetailView, ScheduledEventView

urlpatterns = [
    path("v1/chat/events", EventCollectionView.as_view(), name="events"),
    path("v1/chat/events/scheduled/<str:event_id>", ScheduledEventView.as_view()),
    path("v1/chat/events/<str:event_id>", EventDetailView.as_view(), name="event"),
]
