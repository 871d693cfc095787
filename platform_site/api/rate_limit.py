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
import socket
import ssl
import struct
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import hiredis
import redis
from django.conf import settings
from redis.connection import parse_url
from redis.exceptions import NoScriptError

from platform_site.observability import metrics

logger = logging.getLogger("platform_site.rate_limit")

LOG_EVERY = 10.0
RETRY_AFTER = 1.0
# Seconds Redis has to connect and to answer: it answers in well under a
# millisecond, and a request must not wait long on an ailing one.
TIMEOUT = 0.25
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
# Returns {allowed, retry (µs), now (µs), TAT of each key after the request},
# as integers. A TAT is stored with %.0f: Lua's tostring keeps 14 digits, and
# one in microseconds has 16.
_GCRA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local stored = redis.call('MGET', unpack(KEYS))
local tats = {}
local retry = 0
for i = 1, #KEYS do
  local tat = tonumber(stored[i]) or now
  if tat < now then tat = now end
  tats[i] = tat
  local wait = tat + tonumber(ARGV[2 * i]) - tonumber(ARGV[2 * i - 1]) - now
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
local out = {allowed, retry, now}
for i = 1, #KEYS do out[#out + 1] = tats[i] end
return out
"""


class _Wire:
    """One thread's connection to Redis, for the limiter's one command per
    request. hiredis (redis-py's C parser) packs and parses the protocol,
    replies land in one buffer kept for the connection, and the timeouts are
    the kernel's (SO_RCVTIMEO, SO_SNDTIMEO): a hit makes two system calls,
    where redis-py's connection makes six (a poll before each read and write,
    and a fresh 64 KB read buffer mapped and unmapped), and costs half the
    CPU (BENCHMARKS.md section 9)."""

    def __init__(self, url: str) -> None:
        params = parse_url(url)
        sock: socket.socket
        if "path" in params:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(TIMEOUT)
            sock.connect(params["path"])
        else:
            host = params.get("host", "localhost")
            sock = socket.create_connection((host, params.get("port", 6379)), timeout=TIMEOUT)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if url.startswith("rediss://"):
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
        sock.settimeout(None)
        timeout = struct.pack("ll", 0, int(TIMEOUT * _MICROS))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeout)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeout)
        self._sock = sock
        # Closed with the wire, when its thread ends or its limiter goes.
        weakref.finalize(self, sock.close)
        self._reader = hiredis.Reader()
        self._buffer = bytearray(16384)
        self.generation = _forks
        if params.get("password"):
            credentials = [params.get("username"), params["password"]]
            self.call("AUTH", *(part for part in credentials if part))
        if params.get("db"):
            self.call("SELECT", params["db"])

    def call(self, *args: Any) -> Any:
        self._sock.sendall(hiredis.pack_command(args))
        while (reply := self._reader.gets()) is False:
            read = self._sock.recv_into(self._buffer)
            if not read:
                raise redis.ConnectionError("Redis closed the connection")
            # Any buffer will do; the stub says bytes only.
            self._reader.feed(self._buffer, 0, read)  # type: ignore[arg-type]
        if isinstance(reply, hiredis.ReplyError):
            message = str(reply)
            if message.startswith("NOSCRIPT"):
                raise NoScriptError(message)
            raise redis.ResponseError(message)
        return reply

    def close(self) -> None:
        self._sock.close()


# Forks so far: a wire made before a fork belongs to the parent.
_forks = 0


def _forked() -> None:
    global _forks
    _forks += 1


os.register_at_fork(after_in_child=_forked)


class RedisLimiter:
    """The algorithm in Redis, shared by every process that uses the same URL,
    over a connection per thread (_Wire)."""

    def __init__(self, url: str, *, prefix: str) -> None:
        self.url = url
        self.prefix = prefix
        self._sha = hashlib.sha1(_GCRA.encode()).hexdigest()
        self._local = threading.local()
        self._resting_until = 0.0
        self._logged_at = -math.inf

    def hit(self, policies: Sequence[Policy]) -> Decision | None:
        """Count a request against `policies` if all allow it; None when Redis
        cannot tell (the request is then let through)."""
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
        return _decision(policies, allowed == 1, retry, tats, now)

    def _evaluate(self, keys: list[str], args: list[int]) -> Any:
        wire: _Wire | None = getattr(self._local, "wire", None)
        if wire is None or wire.generation != _forks:
            wire = self._local.wire = _Wire(self.url)
        try:
            try:
                return wire.call("EVALSHA", self._sha, len(keys), *keys, *args)
            except NoScriptError:
                # A Redis that restarted, or that never saw the script.
                wire.call("SCRIPT", "LOAD", _GCRA)
                return wire.call("EVALSHA", self._sha, len(keys), *keys, *args)
        except BaseException:
            # In an unknown state (a reply may be on its way): the next hit reconnects.
            self._local.wire = None
            wire.close()
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
    decision = limiter().hit(policies)
    if decision is not None and not decision.allowed and decision.quotas:
        # One count per refused request, for the limit that ran out first.
        exhausted = min(decision.quotas, key=lambda quota: quota.remaining)
        metrics.rate_limit_rejected(exhausted.policy.name)
    return decision


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
