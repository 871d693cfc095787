"""GET /metrics: the Prometheus text of every web and worker process
(platform_site/observability/metrics.py), off the public API surface.

Answered to the networks of METRICS_ALLOW_NETWORKS (loopback by default) and
to any client presenting METRICS_BEARER_TOKEN; to anyone else it does not
exist (404), and a wrong token is a 401. The client's address is the one
uvicorn gives: the connection's, or X-Forwarded-For from the proxies named in
FORWARDED_ALLOW_IPS. A request forwarded by a proxy that is not named there
has the proxy's address (on the same host: loopback), which is not taken:
such a request needs the token."""

import hmac
import ipaddress
from functools import cache

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string
from django.views.decorators.csrf import csrf_exempt
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from platform_site.api import errors
from platform_site.api.exception_handler import error_response, page_not_found
from platform_site.observability.metrics_files import host_registry


@cache
def _allowed_networks() -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(
        ipaddress.ip_network(network, strict=False) for network in settings.METRICS_ALLOW_NETWORKS
    )


def _address_allowed(request: HttpRequest) -> bool:
    if not settings.FORWARDED_ALLOW_IPS and (
        "HTTP_X_FORWARDED_FOR" in request.META or "HTTP_FORWARDED" in request.META
    ):
        return False
    address = request.META.get("REMOTE_ADDR", "")
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    return any(parsed in network for network in _allowed_networks())


def _token_presented(request: HttpRequest) -> bool | None:
    """True for the right bearer token, False for a wrong one, None for none
    (nor any when no token is set: then the page does not exist for them)."""
    scheme, _, token = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    expected = settings.METRICS_BEARER_TOKEN
    if not expected or scheme.lower() != "bearer":
        return None
    return hmac.compare_digest(token.strip().encode(), expected.encode())


@csrf_exempt  # no cookie is read: a POST is refused like any other method
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not settings.METRICS_ENABLED:
        return page_not_found(request)
    token = _token_presented(request)
    if not token and not _address_allowed(request):
        if token is False:
            return error_response(
                errors.Unauthorized(
                    "Invalid metrics token", headers={"WWW-Authenticate": 'Bearer realm="metrics"'}
                )
            )
        return page_not_found(request)
    if request.method not in ("GET", "HEAD"):
        return error_response(
            errors.MethodNotFound(
                f"Method {request.method!r} not allowed on /metrics: use GET",
                headers={"Allow": "GET, HEAD"},
            )
        )
    registry = host_registry()
    for path in settings.METRICS_COLLECTORS:
        registry.register(import_string(path)())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
