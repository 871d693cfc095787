"""Liveness and readiness probes for load balancers and orchestrators."""

from django.conf import settings
from django.db import OperationalError, connection
from drf_spectacular.utils import extend_schema
from kombu import Connection
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from platform_site.api.answers import LivenessSerializer, ReadinessSerializer
from platform_site.api.database import database_broken_connection_dropped
from platform_site.api.errors import Unavailable
from platform_site.api.schema import ERROR
from platform_site.api.views import ApiViewSet


class HealthViewSet(ApiViewSet):
    """The probes: no credentials, never rate limited (a load balancer's
    polling must never be refused)."""

    authentication_classes = []
    permissions_by_action = {"live": [AllowAny], "ready": [AllowAny]}
    rate_limited = False

    @extend_schema(
        summary="Liveness", operation_id="getLiveness", responses={200: LivenessSerializer}
    )
    def live(self, request: Request) -> Response:
        """The process is up and answering."""
        return Response({"status": "ok"})

    @extend_schema(
        summary="Readiness",
        operation_id="getReadiness",
        responses={200: ReadinessSerializer, 503: ERROR},
    )
    def ready(self, request: Request) -> Response:
        """The database and the broker are reachable: this process can do its work."""
        # The database's answer, not that of the one pooled connection the
        # probe happens to get: one a restart broke while idle in the pool is
        # dropped and the query tried once more (on a fresh connection, the
        # pool's idle ones checked meanwhile). The first probe after the
        # database is back answers ready, however many broken connections the
        # pool held; a probe answers not ready only when the database is away.
        try:
            try:
                _select_one()
            except OperationalError:
                if not database_broken_connection_dropped():
                    raise
                _select_one()
        except Exception as exc:
            raise Unavailable("The database is not reachable") from exc
        try:
            with Connection(
                settings.CELERY_BROKER_URL,
                transport_options=getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}),
                connect_timeout=2,
            ) as broker:
                broker.ensure_connection(max_retries=1, timeout=2)
        except Exception as exc:
            raise Unavailable("The broker is not reachable") from exc
        return Response({"status": "ready", "database": "ok", "broker": "ok"})


def _select_one() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
