"""Rate limits the DRF way: a throttle says which policies a request counts
against (platform_site/api/rate_limit.py counts), the view's answer carries
where they stand (ApiViewSet.finalize_response), and a refusal is DRF's
Throttled, which the exception handler answers as 429 RateLimited."""

import ipaddress
from collections.abc import Sequence
from typing import Any

from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from platform_site.api.rate_limit import Policy, rate_limit_hit


def client_address(address: str) -> str:
    """The address a client limit is kept for, given REMOTE_ADDR (the server
    takes it from forwarded headers only for FORWARDED_ALLOW_IPS): for IPv6
    its /64, since one client holds a whole /64 and picks addresses in it at will."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(parsed)


class RateLimitThrottle(BaseThrottle):
    """One round trip to the limiter for all of a request's policies. DRF
    makes a throttle per request, so it may hold the request's answer."""

    def policies(self, request: Request, view: Any) -> Sequence[Policy]:
        """The policies the request counts against; none when this throttle
        does not apply to it."""
        raise NotImplementedError

    def allow_request(self, request: Request, view: Any) -> bool:
        self.decision = rate_limit_hit(self.policies(request, view))
        if self.decision is None:
            return True
        view.rate_limit = self.decision
        return self.decision.allowed

    def wait(self) -> float | None:
        return self.decision.retry_after if self.decision is not None else None
