"""`Idempotency-Key` on the POSTs that create: a client that retries after a
network error gets the first answer again instead of a second object.

A key belongs to a scope, the credential and what it acts on (the principals'
`idempotency_scope`), so nobody else can replay it. The first request claims
the key with a row committed on its own; a concurrent twin finds the row and
is refused (409) while it is in flight. The view then runs in one transaction
with the UPDATE that stores its answer, conditional on the claim: the object
made and the answer kept commit together or not at all, so one key never makes
two objects, even across a crash (a claim whose process died is taken over
once `locked_until` passes, and the request that lost it rolls back).

Only a 2xx answer is kept. An error, raised or answered, made nothing (the
transaction rolled back), so the claim is released and the client may send
the same key again with the request mended. Rows expire after
IDEMPOTENCY_KEY_TTL_HOURS and are purged by beat (bots/tasks.py)."""

import functools
import hashlib
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Concatenate, ParamSpec, overload

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.http import HttpResponse, HttpResponseBase
from django.utils import timezone
from rest_framework.request import Request
from rest_framework.response import Response

from bots.models import IdempotencyKey
from platform_site.api.errors import IdempotencyConflict, IdempotencyMismatch, InvalidPayload
from platform_site.api.schema import IDEMPOTENCY_KEY_MAX_LENGTH, TAKES_IDEMPOTENCY_KEY
from platform_site.secret_fields import secret_seal, secret_unseal

P = ParamSpec("P")
ViewPost = Callable[Concatenate[Any, Request, P], HttpResponseBase]
Scope = Callable[[Request], str]

KEY_HEADER = "HTTP_IDEMPOTENCY_KEY"
KEY_RE = re.compile(rf"[\x20-\x7e]{{1,{IDEMPOTENCY_KEY_MAX_LENGTH}}}")
# What a replay must repeat beside the body; the rest is the server's to set anew.
KEPT_HEADERS = ("Content-Type", "Location")
# Each attempt loses only to another request changing the row in between.
CLAIM_ATTEMPTS = 3


@dataclass(frozen=True)
class Claim:
    """A request's hold on its key: the row, and the token that says it is this request's."""

    pk: int
    token: str


def principal_scope(request: Request) -> str:
    """The scope of an authenticated caller: its principal's."""
    scope = getattr(request.auth, "idempotency_scope", None)
    if not isinstance(scope, str):
        raise TypeError("the view's principal has no idempotency_scope")
    return scope


# Headers that change what a create makes (the integration an event records).
FINGERPRINTED_HEADERS = ("HTTP_X_INTEGRATION_ID", "HTTP_X_INTEGRATION_ALIAS")


def request_fingerprint(request: Request) -> str:
    """What tells a retry from another request under the same key."""
    digest = hashlib.sha256()
    headers = (request.META.get(name, "") for name in FINGERPRINTED_HEADERS)
    for part in (request.method or "", request.get_full_path(), *headers):
        digest.update(part.encode())
        digest.update(b"\n")
    digest.update(request.body)
    return digest.hexdigest()


@overload
def idempotent_create(post: ViewPost[P]) -> ViewPost[P]: ...


@overload
def idempotent_create(*, scope: Scope) -> Callable[[ViewPost[P]], ViewPost[P]]: ...


def idempotent_create(
    post: ViewPost[P] | None = None, *, scope: Scope = principal_scope
) -> ViewPost[P] | Callable[[ViewPost[P]], ViewPost[P]]:
    """Decorates a view's `post`: with an Idempotency-Key, it runs once per
    key and scope, and a retry is answered what it answered. `scope` names
    whose keys they are where the caller has no principal.

    The replay is returned, not raised, so that the view's finalize_response
    dresses it like any answer."""

    def decorate(post: ViewPost[P]) -> ViewPost[P]:
        @functools.wraps(post)
        def keyed(
            view: Any, request: Request, *args: P.args, **kwargs: P.kwargs
        ) -> HttpResponseBase:
            # The hot path: a create without the header pays this lookup only.
            key = request.META.get(KEY_HEADER)
            if key is None:
                return post(view, request, *args, **kwargs)
            return idempotent_run(
                key=key,
                scope=scope(request),
                fingerprint=request_fingerprint(request),
                handle=lambda: rendered(view, request, post(view, request, *args, **kwargs)),
            )

        setattr(keyed, TAKES_IDEMPOTENCY_KEY, True)
        return keyed

    return decorate if post is None else decorate(post)


def rendered(view: Any, request: Request, response: HttpResponseBase) -> HttpResponse:
    """The answer with its body rendered now, as the view will send it, so it can be kept."""
    if not isinstance(response, HttpResponse):
        raise TypeError("a create answers with a whole body, not a stream")
    if isinstance(response, Response):
        # What finalize_response would set later, needed to render now
        # (renderer_context is missing from the stubs).
        response.accepted_renderer = request.accepted_renderer
        response.accepted_media_type = request.accepted_media_type
        response.renderer_context = view.get_renderer_context()  # type: ignore[attr-defined]
        response.render()
    return response


def idempotent_run(
    *, key: str, scope: str, fingerprint: str, handle: Callable[[], HttpResponse]
) -> HttpResponse:
    """`handle()`'s answer, once per key and scope; a retry's is the first one's."""
    if not KEY_RE.fullmatch(key):
        raise InvalidPayload(
            f"Idempotency-Key: Must be 1 to {IDEMPOTENCY_KEY_MAX_LENGTH} printable ASCII"
            " characters."
        )
    claim = idempotency_key_claim(scope=scope, key=key, fingerprint=fingerprint)
    if isinstance(claim, HttpResponse):
        return claim
    try:
        with transaction.atomic():
            response = handle()
            kept = 200 <= response.status_code < 300
            if kept:
                _answer_store(claim, response)
            else:
                # An error answered rather than raised keeps nothing either.
                transaction.set_rollback(True)
    except Exception:
        _release(claim)
        raise
    if not kept:
        _release(claim)
    return response


def idempotency_key_claim(*, scope: str, key: str, fingerprint: str) -> Claim | HttpResponse:
    """This request's claim on the key, or the answer to replay; IdempotencyMismatch
    or IdempotencyConflict when the key is another request's."""
    token = secrets.token_hex(16)
    for _ in range(CLAIM_ATTEMPTS):
        now = timezone.now()
        row = IdempotencyKey(scope=scope, key=key, fingerprint=fingerprint, **_fresh(token, now))
        try:
            # Committed at once, on its own: concurrent twins must see it.
            with transaction.atomic():
                row.save(force_insert=True)
            return Claim(pk=row.pk, token=token)
        except IntegrityError:
            pass
        found = IdempotencyKey.objects.filter(scope=scope, key=key).first()
        if found is None:
            continue  # released meanwhile
        if not _takeable(found, now):
            if found.fingerprint != fingerprint:
                raise IdempotencyMismatch(
                    "This Idempotency-Key was used with another request (method, path or"
                    " body): use a new key for a new request"
                )
            if found.status_code is not None:
                return _replay(found)
            raise IdempotencyConflict()
        if _take_over(found, token=token, fingerprint=fingerprint, now=now):
            return Claim(pk=found.pk, token=token)
    raise IdempotencyConflict()


def _fresh(token: str, now: datetime) -> dict[str, Any]:
    return {
        "claim": token,
        "locked_until": now + timedelta(seconds=settings.IDEMPOTENCY_LOCK_SECONDS),
        "expires_at": now + timedelta(hours=settings.IDEMPOTENCY_KEY_TTL_HOURS),
    }


def _stale(now: datetime) -> Q:
    """Rows that count as absent: expired, or held by a request that died."""
    return Q(expires_at__lte=now) | Q(status_code__isnull=True, locked_until__lte=now)


def _takeable(row: IdempotencyKey, now: datetime) -> bool:
    return row.expires_at <= now or (
        row.status_code is None and row.locked_until is not None and row.locked_until <= now
    )


def _take_over(row: IdempotencyKey, *, token: str, fingerprint: str, now: datetime) -> bool:
    # Conditional on what made the row takeable, and on its claim: of two
    # takers one wins, and an answer stored meanwhile is not overwritten.
    return (
        IdempotencyKey.objects.filter(_stale(now), pk=row.pk, claim=row.claim).update(
            fingerprint=fingerprint,
            status_code=None,
            response_body=b"",
            response_headers={},
            created_at=now,
            **_fresh(token, now),
        )
        == 1
    )


def _answer_store(claim: Claim, response: HttpResponse) -> None:
    """Keep the answer, in the transaction that made what it describes."""
    stored = IdempotencyKey.objects.filter(pk=claim.pk, claim=claim.token).update(
        status_code=response.status_code,
        # Encrypted like the secrets at rest: it may hold one (POST /users
        # answers with a user key).
        response_body=secret_seal(response.content),
        response_headers={name: response[name] for name in KEPT_HEADERS if name in response},
        locked_until=None,
    )
    if not stored:
        # Another request took the key over (this one ran past its lock): it
        # answers, and what this one made rolls back.
        raise IdempotencyConflict(
            "This request ran past the hold on its Idempotency-Key and another took it over;"
            " nothing was made"
        )


def _release(claim: Claim) -> None:
    IdempotencyKey.objects.filter(pk=claim.pk, claim=claim.token, status_code__isnull=True).delete()


def _replay(row: IdempotencyKey) -> HttpResponse:
    response = HttpResponse(secret_unseal(bytes(row.response_body)), status=row.status_code)
    for name, value in row.response_headers.items():
        response[name] = value
    response["Idempotent-Replayed"] = "true"
    return response


def idempotency_keys_purge_expired(*, now: datetime | None = None) -> int:
    """Delete expired keys, IDEMPOTENCY_PURGE_BATCH per statement, so a large
    purge never holds one long transaction; answers how many."""
    now = now or timezone.now()
    size = settings.IDEMPOTENCY_PURGE_BATCH
    expired = IdempotencyKey.objects.filter(expires_at__lte=now)
    deleted = 0
    while True:
        ids = list(expired.order_by().values_list("pk", flat=True)[:size])
        if ids:
            # Expired is checked again: a key taken over meanwhile stays.
            deleted += expired.filter(pk__in=ids).delete()[0]
        if len(ids) < size:
            return deleted
