from django.urls import path

from events.views import EventViewSet

urlpatterns = [
    path("v1/chat/events", EventViewSet.as_view({"get": "list", "post": "create"}), name="events"),
    path("v1/chat/events/scheduled/<str:event_id>", EventViewSet.as_view({"delete": "cancel"})),
    path("v1/chat/events/<str:event_id>", EventViewSet.as_view({"get": "retrieve"}), name="event"),
]
