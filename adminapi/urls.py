from django.urls import path

from adminapi.views import BotCollectionView

urlpatterns = [
    path("v1/admin/bots", BotCollectionView.as_view(), name="admin-bots"),
]
