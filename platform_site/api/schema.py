"""Shared pieces of the OpenAPI document."""

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers


class ErrorBodySerializer(serializers.Serializer):
    """The one error body of every endpoint."""

    id = serializers.CharField(help_text="Unique per occurrence, e.g. err_1732269600000x4F2A9C1B")
    code = serializers.IntegerField(help_text="The HTTP status")
    type = serializers.CharField(help_text="InvalidPayload, Unauthorized, ResourceNotFound, …")
    message = serializers.CharField()


ERROR = OpenApiResponse(ErrorBodySerializer, description="The error body")
ERRORS = {status: ERROR for status in (400, 401, 403, 404, 413, 415)}

NEXT_TOKEN = OpenApiParameter("nextToken", str, description="meta.nextToken of the previous page")
PAGE_SIZE = OpenApiParameter("pageSize", int, description="1 to 200")
