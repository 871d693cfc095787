"""What credentials stand for, remembered by each process for a short while.

Every API request starts by asking what its bearer token (or chat webhook id
and user key) stands for. A CredentialCache keeps the answers of one kind of
lookup: plain immutable values (ids, role, expiry), from which each request
builds its own model instances, so no mutable object is shared between
threads. Only answers that let a caller in are kept: an unknown token or a
membership just made is read again at once.

An answer is trusted for CREDENTIALS_CACHE_SECONDS if this process's
invalidation subscriber (platform_site/foundation/credential_invalidation.py) has been listening
since before the answer was read, for UNWATCHED_MAX_AGE seconds otherwise:
either way a revocation reaches every process within about a second. Any
invalidation forgets every answer (they are rare), and an answer read before
one is never stored after it."""

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from django.conf import settings

from platform_site.foundation import credential_invalidation

MAX_ENTRIES = 10_000
UNWATCHED_MAX_AGE = 1.0

V = TypeVar("V")

# Tests replace it to age entries without sleeping.
clock: Callable[[], float] = time.monotonic


@dataclass(frozen=True)
class Fetch:
    """Taken before a lookup reads the database."""

    started_at: float
    generation: int


class _Process:
    """The lock and invalidation count of this process; a forked child starts afresh."""

    def __init__(self, generation: int = 0) -> None:
        self.lock = threading.Lock()
        self.generation = generation


_process = _Process()
_caches: "list[CredentialCache[object]]" = []


def enabled() -> bool:
    return float(settings.CREDENTIALS_CACHE_SECONDS) > 0


def _max_age(fetched_at: float) -> float:
    limit = float(settings.CREDENTIALS_CACHE_SECONDS)
    listening = credential_invalidation.listening_since()
    if listening is not None and listening <= fetched_at:
        return limit
    return min(limit, UNWATCHED_MAX_AGE)


class CredentialCache(Generic[V]):
    """One kind of lookup's answers by key, least recently used first out."""

    def __init__(self, name: str, *, max_entries: int = MAX_ENTRIES) -> None:
        self.name = name
        self.max_entries = max_entries
        # key -> (when its lookup started, by `clock`; the answer)
        self._entries: OrderedDict[Hashable, tuple[float, V]] = OrderedDict()
        _caches.append(self)  # type: ignore[arg-type]

    def get(self, key: Hashable) -> V | None:
        """The answer kept for `key` while it may still be trusted, else None."""
        if not enabled():
            return None
        with _process.lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is None:
            return None
        fetched_at, value = entry
        # Outside the lock: the subscriber's state has a lock of its own.
        if clock() - fetched_at < _max_age(fetched_at):
            return value
        with _process.lock:
            if self._entries.get(key) is entry:
                del self._entries[key]
        return None

    def fetch(self) -> Fetch:
        """Call before reading the database; hand the result to `put`."""
        if enabled():
            credential_invalidation.listening_since()  # starts the subscriber on first use
        with _process.lock:
            return Fetch(started_at=clock(), generation=_process.generation)

    def put(self, fetch: Fetch, key: Hashable, value: V) -> None:
        """Keep an answer read since `fetch`, unless an invalidation came meanwhile."""
        if not enabled():
            return
        with _process.lock:
            if fetch.generation != _process.generation:
                return
            self._entries[key] = (fetch.started_at, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def replace(self, key: Hashable, old: V, new: V) -> None:
        """Swap an answer for an updated copy of itself (as old as it was)."""
        with _process.lock:
            entry = self._entries.get(key)
            if entry is not None and entry[1] is old:
                self._entries[key] = (entry[0], new)

    def __len__(self) -> int:
        return len(self._entries)


def credential_caches_clear() -> None:
    """Forget every answer of this process; lookups under way keep theirs to themselves."""
    with _process.lock:
        _process.generation += 1
        for cache in _caches:
            cache._entries.clear()


def _after_fork() -> None:
    global _process
    # The parent's lock may have been held by a thread that does not exist here.
    _process = _Process(_process.generation + 1)
    for cache in _caches:
        cache._entries.clear()


os.register_at_fork(after_in_child=_after_fork)
credential_invalidation.on_invalidation(credential_caches_clear)
