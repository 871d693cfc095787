from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from chat.runtime.serializers import AnalyticsTrackSerializer
from chat.runtime.views.base import RuntimeViewSet
from events.services.analytics import analytics_track
from platform_site.api.answers import EmptyAnswerSerializer
from platform_site.api.permissions import CanWriteMessages
from platform_site.api.principals import bot_principal


class RuntimeAnalyticsViewSet(RuntimeViewSet):
    """What a bot counts: figures of its own, by name and minute, that the
    Django admin's dashboard shows."""

    permissions_by_action = {"track": [CanWriteMessages]}

    @extend_schema(
        summary="Count something the bot tracks",
        description=(
            "Adds `count` to the bot's figure named `name` for the current minute (UTC). The"
            " Django admin's dashboard shows the top names of the last day; minutes are kept"
            " as long as the dashboard's other figures. A retry counts again: this is no"
            " create, and takes no Idempotency-Key."
        ),
        operation_id="trackAnalytics",
        request=AnalyticsTrackSerializer,
        responses={200: EmptyAnswerSerializer},
    )
    def track(self, request: Request) -> Response:
        serializer = AnalyticsTrackSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        analytics_track(
            bot=bot_principal(request).bot,
            name=serializer.validated_data["name"],
            count=serializer.validated_data["count"],
        )
        return Response({})
