"""Rate limits: the generic cell rate algorithm (GCRA) over named policies.

A policy allows `limit` requests per `window` seconds to one key (a
workspace, a token, a chat user, a client address). GCRA keeps one number
per key, its theoretical arrival time (TAT): each allowed request moves it
`window / limit` later, and a request is refused while the TAT runs more than
a whole window ahead of now. So a quiet key may burst `limit` requests, and
then gets one every `window / limit` seconds: exact, with no window edges.

A request is checked against all of its policies at once and counts against
them only when every one allows it, in one atomic step: one Lua script, one
round trip, in Redis when RATE_LIMIT_REDIS_URL is set (every web process
shares it), else in this process's memory (the embedded default runs one web
process). Time is Redis's own clock there, so processes on hosts whose clocks
disagree still agree on the limit.

If Redis cannot answer, the request goes through and the failure is logged
(at most every LOG_EVERY seconds); Redis is then left alone for RETRY_AFTER
seconds, so an outage costs requests nothing but a log line."""

import hashlib
import logging
import math
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

import redis
from django.conf import settings
from redis.backoff import NoBackoff
from redis.connection import ConnectionInterface
from redis.exceptions import NoScriptError
from redis.retry import Retry

logger = logging.getLogger("platform_site.rate_limit")

LOG_EVERY = 10.0
RETRY_AFTER = 1.0
_MICROS = 1_000_000


@dataclass(frozen=True)
class Policy:
    """At most `limit` requests per `window` seconds for `key`; `name` is what
    the RateLimit headers call it."""

    name: str
    key: str
    limit: int
    window: int = 60


@dataclass(frozen=True)
class Quota:
    """Where one policy stands after a request: `remaining` requests allowed
    right now, and `reset` seconds until the whole limit is available again."""

    policy: Policy
    remaining: int
    reset: int


@dataclass(frozen=True)
class Decision:
    allowed: bool
    # Seconds until the refused request would be allowed (0 when allowed).
    retry_after: float
    quotas: tuple[Quota, ...]


def _counter(policy: Policy) -> str:
    """Where a policy's TAT is kept: a changed limit starts a count of its own,
    so that raising a limit takes effect at once, not once the debt run up
    under the old one is paid."""
    return f"{policy.key}:{policy.limit}/{policy.window}"


def _interval(policy: Policy) -> int:
    """Microseconds between two requests at the sustained rate (rounded down:
    the error is at most a microsecond in favour of the client; at least one,
    which no limit of this world reaches)."""
    return max(policy.window * _MICROS // policy.limit, 1)


def _decision(
    policies: Sequence[Policy], allowed: bool, retry: int, tats: Sequence[int], now: int
) -> Decision:
    quotas = []
    for policy, tat in zip(policies, tats, strict=True):
        interval = _interval(policy)
        behind = max(tat - now, 0)
        remaining = (policy.window * _MICROS - behind) // interval
        quotas.append(Quota(policy, max(int(remaining), 0), math.ceil(behind / _MICROS)))
    return Decision(allowed, retry / _MICROS, tuple(quotas))


class Limiter(Protocol):
    def hit(self, policies: Sequence[Policy]) -> Decision | None:
        """Count a request against `policies` if all allow it; None when the
        limiter cannot tell (the request is then let through)."""


class MemoryLimiter:
    """The algorithm in this process's memory, for one web process."""

    # Keys whose TAT has passed hold nothing worth keeping; they are swept
    # once the table grows past this many.
    SWEEP_AT = 100_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tats: dict[str, int] = {}

    def hit(self, policies: Sequence[Policy]) -> Decision:
        now = time.time_ns() // 1000
        with self._lock:
            tats = [max(self._tats.get(_counter(policy), now), now) for policy in policies]
            retry = 0
            for policy, tat in zip(policies, tats, strict=True):
                retry = max(retry, tat + _interval(policy) - policy.window * _MICROS - now)
            allowed = retry <= 0
            if allowed:
                tats = [tat + _interval(policy) for policy, tat in zip(policies, tats, strict=True)]
                for policy, tat in zip(policies, tats, strict=True):
                    self._tats[_counter(policy)] = tat
                if len(self._tats) > self.SWEEP_AT:
                    self._tats = {key: tat for key, tat in self._tats.items() if tat > now}
        return _decision(policies, allowed, max(retry, 0), tats, now)

    def clear(self) -> None:
        with self._lock:
            self._tats.clear()


# KEYS: one per policy. ARGV: window and interval (microseconds) per policy.
# Returns {allowed, retry (µs), now (µs), TAT of each key after the request}.
# Numbers are written with %.0f: Lua's tostring keeps 14 digits, and a TAT in
# microseconds has 16.
_GCRA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tats = {}
local retry = 0
for i = 1, #KEYS do
  local window = tonumber(ARGV[2 * i - 1])
  local interval = tonumber(ARGV[2 * i])
  local tat = tonumber(redis.call('GET', KEYS[i]) or now)
  if tat < now then tat = now end
  tats[i] = tat
  local wait = tat + interval - window - now
  if wait > retry then retry = wait end
end
local allowed = 0
if retry <= 0 then
  allowed = 1
  for i = 1, #KEYS do
    tats[i] = tats[i] + tonumber(ARGV[2 * i])
    redis.call('SET', KEYS[i], string.format('%.0f', tats[i]),
      'PX', math.ceil((tats[i] - now) / 1000) + 1)
  end
end
local out = {allowed, string.format('%.0f', retry), string.format('%.0f', now)}
for i = 1, #KEYS do out[#out + 1] = string.format('%.0f', tats[i]) end
return out
"""


class RedisLimiter:
    """The algorithm in Redis, shared by every process that uses the same URL.

    Each thread talks to Redis over a connection of its own, through redis-py's
    Connection without the client and pool around it: the hit is on every
    request's path, and those layers (with its Script helper) cost three times
    the CPU of the round trip itself (BENCHMARKS.md section 9)."""

    def __init__(self, url: str, *, prefix: str) -> None:
        self.prefix = prefix
        # No retry: the script may have counted a request whose answer was lost.
        self._pool = redis.ConnectionPool.from_url(
            url, socket_timeout=0.25, socket_connect_timeout=0.25, retry=Retry(NoBackoff(), 0)
        )
        self._sha = hashlib.sha1(_GCRA.encode()).hexdigest()
        self._local = threading.local()
        self._resting_until = 0.0
        self._logged_at = -math.inf

    def hit(self, policies: Sequence[Policy]) -> Decision | None:
        if time.monotonic() < self._resting_until:
            return None
        args: list[int] = []
        for policy in policies:
            args += (policy.window * _MICROS, _interval(policy))
        keys = [self.prefix + _counter(policy) for policy in policies]
        try:
            allowed, retry, now, *tats = self._evaluate(keys, args)
        except (redis.RedisError, OSError) as exc:
            self._failed(exc)
            return None
        return _decision(policies, allowed == 1, int(retry), [int(tat) for tat in tats], int(now))

    def _connection(self) -> ConnectionInterface:
        held = getattr(self._local, "held", None)
        # A forked child must not share its parent's socket.
        if held is None or held[0] != os.getpid():
            held = self._local.held = (os.getpid(), self._pool.make_connection())
        return held[1]

    def _evaluate(self, keys: list[str], args: list[int]) -> Any:
        connection = self._connection()
        try:
            try:
                connection.send_command("EVALSHA", self._sha, len(keys), *keys, *args)
                return connection.read_response()
            except NoScriptError:
                # A Redis that restarted, or that never saw the script.
                connection.send_command("SCRIPT", "LOAD", _GCRA)
                connection.read_response()
                connection.send_command("EVALSHA", self._sha, len(keys), *keys, *args)
                return connection.read_response()
        except BaseException:
            connection.disconnect()  # in an unknown state: the next hit reconnects
            raise

    def _failed(self, exc: Exception) -> None:
        self._resting_until = time.monotonic() + RETRY_AFTER
        if time.monotonic() - self._logged_at >= LOG_EVERY:
            self._logged_at = time.monotonic()
            logger.warning(
                "rate limits not enforced: Redis did not answer (%s); requests go through", exc
            )


@cache
def limiter() -> MemoryLimiter | RedisLimiter:
    url = settings.RATE_LIMIT_REDIS_URL
    if not url:
        return MemoryLimiter()
    # Two deployments (or test runs) on one Redis keep apart by database.
    return RedisLimiter(url, prefix=f"ratelimit:{settings.DATABASES['default']['NAME']}:")


def rate_limit_hit(policies: Sequence[Policy]) -> Decision | None:
    """Count a request against `policies`; None when nothing limits it (rate
    limits off, no policy, or the limiter out of reach)."""
    if not policies or not settings.RATE_LIMIT_ENABLED:
        return None
    return limiter().hit(policies)


def _item(name: str, **params: int) -> str:
    # RFC 8941 structured fields: the policy name is a String item.
    return f'"{name}";' + ";".join(f"{key}={value}" for key, value in params.items())


def rate_limit_headers(decision: Decision) -> dict[str, str]:
    """`RateLimit-Policy` and `RateLimit` of the IETF httpapi ratelimit-headers draft."""
    quotas = decision.quotas
    return {
        "RateLimit-Policy": ", ".join(
            _item(q.policy.name, q=q.policy.limit, w=q.policy.window) for q in quotas
        ),
        "RateLimit": ", ".join(_item(q.policy.name, r=q.remaining, t=q.reset) for q in quotas),
    }
