"""`Idempotency-Key` on the POSTs that create: a client that retries after a
network error gets the first answer again instead of a second object.

A key belongs to a scope, the credential and what it acts on (the principals'
`idempotency_scope`), so nobody else can replay it. The view runs in one
transaction with the INSERT that keeps its answer: the object made and the
answer kept commit together or not at all, so a crash leaves neither, and
the key is free again. A retry (or a twin sent at the same time, whose
INSERT waits on the first's) finds the key taken, rolls back what it made
and answers the kept answer, or 422 when the key came with another request.
One key never makes two objects, and a first request pays one transaction
and one statement (BENCHMARKS.md section 9).

Only a 2xx answer is kept. An error, raised or answered, made nothing (the
transaction rolled back), so the client may send the same key again with the
request mended. Rows expire after IDEMPOTENCY_KEY_TTL_HOURS, count as absent
from then on, and are purged by beat (bots/tasks.py)."""

import functools
import hashlib
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import cache
from typing import Any, Concatenate, ParamSpec, overload

from django.conf import settings
from django.db import connection, transaction
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
    # No look for a kept answer first: a first request (the usual one) would
    # pay a statement for it. A retry runs, finds the key taken when it keeps
    # its answer, and rolls back what it made (all it does beside the
    # database waits for the commit: on_commit).
    try:
        with transaction.atomic():
            response = handle()
            if not 200 <= response.status_code < 300:
                # An error answered rather than raised keeps nothing either.
                transaction.set_rollback(True)
            elif not _answer_keep(scope=scope, key=key, fingerprint=fingerprint, response=response):
                raise _Taken
    except _Taken:
        # Kept first by an earlier request or a twin: what this one made is
        # rolled back, and that answer is this one's.
        kept = _kept_answer(scope=scope, key=key, fingerprint=fingerprint)
        if kept is None:  # it expired in between: a retry starts afresh
            raise IdempotencyConflict() from None
        return kept
    except Exception:
        # A retry that fails now (its conversation was deleted since, say)
        # still gets the first answer.
        kept = _kept_answer(scope=scope, key=key, fingerprint=fingerprint)
        if kept is not None:
            return kept
        raise
    if not 200 <= response.status_code < 300:
        return _kept_answer(scope=scope, key=key, fingerprint=fingerprint) or response
    return response


class _Taken(Exception):
    """The key's answer was kept by another request meanwhile."""


def _kept_answer(*, scope: str, key: str, fingerprint: str) -> HttpResponse | None:
    """The answer kept for the key, to replay; None when there is none;
    IdempotencyMismatch when the key came with another request."""
    row = (
        IdempotencyKey.objects.filter(scope=scope, key=key, expires_at__gt=timezone.now())
        .only("fingerprint", "status_code", "response_body", "response_headers")
        .first()
    )
    if row is None:
        return None
    if row.fingerprint != fingerprint:
        raise IdempotencyMismatch(
            "This Idempotency-Key was used with another request (method, path or"
            " body): use a new key for a new request"
        )
    response = HttpResponse(secret_unseal(bytes(row.response_body)), status=row.status_code)
    for name, value in row.response_headers.items():
        response[name] = value
    response["Idempotent-Replayed"] = "true"
    return response


@cache
def _keep_sql() -> str:
    table = connection.ops.quote_name(IdempotencyKey._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(name) for name in _KEPT_COLUMNS)
    updates = ", ".join(
        f"{connection.ops.quote_name(name)} = excluded.{connection.ops.quote_name(name)}"
        for name in _KEPT_COLUMNS
    )
    placeholders = ", ".join(["%s"] * len(_KEPT_COLUMNS))
    # An expired row counts as absent: it is replaced. Any other row is the
    # twin's, and nothing is returned.
    return (
        f"INSERT INTO {table} ({columns}) VALUES ({placeholders})"
        f" ON CONFLICT (scope, key) DO UPDATE SET {updates}"
        f" WHERE {table}.expires_at <= excluded.created_at RETURNING id"
    )


_KEPT_COLUMNS = (
    "scope",
    "key",
    "fingerprint",
    "status_code",
    "response_body",
    "response_headers",
    "created_at",
    "expires_at",
)


def _answer_keep(*, scope: str, key: str, fingerprint: str, response: HttpResponse) -> bool:
    """Keep the answer, in the transaction that made what it describes; False
    when a twin's is kept already (on PostgreSQL this waits for the twin's
    transaction, holding the key, to end)."""
    now = timezone.now()
    values = {
        "scope": scope,
        "key": key,
        "fingerprint": fingerprint,
        "status_code": response.status_code,
        # Encrypted like the secrets at rest: it may hold one (POST /users
        # answers with a user key).
        "response_body": secret_seal(response.content),
        "response_headers": {name: response[name] for name in KEPT_HEADERS if name in response},
        "created_at": now,
        "expires_at": now + timedelta(hours=settings.IDEMPOTENCY_KEY_TTL_HOURS),
    }
    fields = IdempotencyKey._meta
    params = [
        fields.get_field(name).get_db_prep_save(values[name], connection)  # type: ignore[union-attr]
        for name in _KEPT_COLUMNS
    ]
    with connection.cursor() as cursor:
        cursor.execute(_keep_sql(), params)
        return cursor.fetchone() is not None


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
            # Expired is checked again: a key kept anew meanwhile stays.
            deleted += expired.filter(pk__in=ids).delete()[0]
        if len(ids) < size:
            return deleted
