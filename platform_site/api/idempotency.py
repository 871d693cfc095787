"""`Idempotency-Key` on the POSTs that create: a client that retries after a
network error gets the first answer again instead of a second object.

A key belongs to a scope, the credential and what it acts on (the principals'
`idempotency_scope`), so nobody else can replay it. What the view makes and
the INSERT that keeps its answer commit together or not at all, so a crash
leaves neither, and the key is free again. A retry (or a twin sent at the
same time, whose INSERT waits on the first's) finds the key taken, makes
nothing and answers the kept answer, or 422 when the key came with another
request. One key never makes two objects.

How they commit together costs a first request one statement more than
without a key, and no transaction more (BENCHMARKS.md section 17):
- on PostgreSQL, out of a transaction (as a request runs), the view's plain
  reads run as they would without a key, and the rows it writes with
  rows_write (an event, a chat message) are held and written with the
  kept answer in one statement, atomic by itself: the same round trips as
  without a key. Any other write (a service's ORM writes, a locking read)
  opens the transaction there, writing what was held first; a service's
  own atomic block entered before that starts the transaction instead of
  a savepoint; the answer's INSERT is then one more statement in it. A
  held row that fails in the statement (a reference deleted meanwhile)
  fails it whole, and the request runs again the usual way, which says why;
- elsewhere (SQLite), the view runs in a transaction with the INSERT.
Either way what the view sets off beside the database waits for the commit
(on_commit) and is dropped without it.

Only a 2xx answer is kept. An error, raised or answered, made nothing (the
transaction rolled back, or the held rows were never sent), so the client
may send the same key again with the request mended. Rows expire after
IDEMPOTENCY_KEY_TTL_HOURS, count as absent from then on (an expired row met
is replaced), and are purged by beat (bots/tasks.py)."""

import functools
import hashlib
import re
from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import cache
from typing import Any, Concatenate, ParamSpec, overload

from django.conf import settings
from django.db import DataError, IntegrityError, connection, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.http import HttpResponse, HttpResponseBase
from django.utils import timezone
from rest_framework.request import Request
from rest_framework.response import Response

from bots.models import IdempotencyKey
from bots.models.idempotency import IDEMPOTENCY_KEY_UNIQUE
from platform_site.api.errors import IdempotencyConflict, IdempotencyMismatch, InvalidPayload
from platform_site.api.schema import IDEMPOTENCY_KEY_MAX_LENGTH, TAKES_IDEMPOTENCY_KEY
from platform_site.foundation.secret_fields import secret_seal, secret_unseal
from platform_site.foundation.sql.row_insert import (
    Statement,
    one_statement,
    rows_holder,
    rows_write,
)

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
    django_request = request._request  # read directly, not through DRF's proxy
    digest = hashlib.sha256()
    headers = (django_request.META.get(name, "") for name in FINGERPRINTED_HEADERS)
    for part in (django_request.method or "", django_request.get_full_path(), *headers):
        digest.update(part.encode())
        digest.update(b"\n")
    digest.update(django_request.body)
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
    # its answer, and makes nothing (all it does beside the database waits
    # for the commit: on_commit).
    try:
        response = _made_and_kept(scope=scope, key=key, fingerprint=fingerprint, handle=handle)
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


class _RunAgain(Exception):
    """The rows held back failed to be written with the answer (a reference
    deleted meanwhile, say): nothing was written, and the request runs again
    the usual way, which tells why as it would without a key."""


def _made_and_kept(
    *, scope: str, key: str, fingerprint: str, handle: Callable[[], HttpResponse]
) -> HttpResponse:
    """`handle()`'s answer, what it made and the answer kept committed
    together (none of it unless 2xx); _Taken when the key's answer is kept
    already."""
    # The connection itself, not the proxy that finds it on each use.
    db = transaction.get_connection()
    if db.vendor == "postgresql" and db.get_autocommit() and not db.in_atomic_block:
        try:
            return _made_and_kept_in_one_statement(
                db, scope=scope, key=key, fingerprint=fingerprint, handle=handle
            )
        except _RunAgain:
            pass
    with transaction.atomic():
        response = handle()
        if not 200 <= response.status_code < 300:
            # An error answered rather than raised keeps nothing either.
            transaction.set_rollback(True)
        elif not _answer_keep(
            db=db, scope=scope, key=key, fingerprint=fingerprint, response=response
        ):
            raise _Taken
    return response


def _made_and_kept_in_one_statement(
    db: BaseDatabaseWrapper,
    *,
    scope: str,
    key: str,
    fingerprint: str,
    handle: Callable[[], HttpResponse],
) -> HttpResponse:
    """_made_and_kept on PostgreSQL: while `handle()` runs, the connection
    stays out of a transaction and the rows it writes with rows_write are
    held, to be written with the answer in one statement. Anything else it
    writes opens the transaction at once (_HeldRows), and the answer is
    kept in that transaction."""
    # The atomic block collects on_commit callbacks, runs them once the
    # statement has committed and drops them if it does not; a block in
    # which the driver sent nothing sends no BEGIN or COMMIT either.
    with transaction.atomic(), _HeldRows(db) as rows:
        response = handle()
        if not 200 <= response.status_code < 300:
            db.set_rollback(True)  # what was held is dropped
        elif rows.holding:
            if not _answer_keep_with_rows(
                db,
                rows.release(),
                scope=scope,
                key=key,
                fingerprint=fingerprint,
                response=response,
            ):
                raise _Taken
        elif not _answer_keep(
            db=db, scope=scope, key=key, fingerprint=fingerprint, response=response
        ):
            raise _Taken
    return response


# A read that locks rows needs the transaction that holds the locks.
_LOCKING_READ = re.compile(r"\bFOR\s+(?:NO\s+KEY\s+)?(?:UPDATE|SHARE|KEY\s+SHARE)\b", re.I)
# Django's savepoint statements (a nested atomic block: a service's own).
_SAVEPOINT = re.compile(r"(SAVEPOINT|RELEASE SAVEPOINT|ROLLBACK TO SAVEPOINT) (\"[^\"]+\")")


class _HeldRows:
    """What a keyed create on PostgreSQL writes, held back while it can be.

    Entered in the outermost atomic block, before the driver has sent a
    statement: the driver back in autocommit, rows_write's statements held,
    anything else but a plain read opening the transaction
    (before_statement); on the way out, the driver as the block left it."""

    def __init__(self, db: BaseDatabaseWrapper) -> None:
        self.db = db
        self.driver: Any = db.connection  # psycopg's connection
        self.held: list[Statement] = []
        self.holding = True
        # Savepoints not sent: each was the start of the transaction.
        self.elided: set[str] = set()

    def __enter__(self) -> "_HeldRows":
        self.driver.autocommit = True
        self.token = rows_holder.set(self.hold)
        self.wrapping = self.db.execute_wrapper(self.before_statement)
        self.wrapping.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wrapping.__exit__(None, None, None)
        rows_holder.reset(self.token)
        # The driver may stay in autocommit: the atomic block's commit or
        # rollback, next, has nothing to end then, and it sets autocommit.

    def hold(self, statements: Sequence[Statement]) -> bool:
        """rows_holder: keep rows_write's statements, while holding."""
        if self.holding:
            self.held += statements
        return self.holding

    def release(self) -> list[Statement]:
        """What was held, to be written now: nothing is held from here on."""
        self.holding = False
        return self.held

    def transaction_open(self) -> None:
        """From the next statement on, a transaction, which starts by writing
        what was held."""
        held = self.release()
        self.driver.autocommit = False  # BEGIN goes with the next statement
        if held:
            rows_write(*held)

    def before_statement(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        """The connection's execute wrapper: a plain read may run out of a
        transaction, as before the first write; anything else (a write, a
        locking read, a savepoint, any statement once rows are held, which
        it may read) first opens the transaction and writes what was held.

        A savepoint that would be the transaction's first statement (a
        service's atomic block entered before anything was written) is not
        sent: the transaction starts there instead. Released, nothing is
        sent either; rolled back to, the transaction is."""
        savepoint = _SAVEPOINT.fullmatch(sql)
        if savepoint is not None:
            verb, name = savepoint.groups()
            if verb == "SAVEPOINT" and self.holding and not self.held:
                self.transaction_open()
                self.elided.add(name)
                return None
            if name in self.elided:
                from psycopg.pq import TransactionStatus  # PostgreSQL's driver, imported on it

                if verb == "RELEASE SAVEPOINT":
                    self.elided.discard(name)
                elif self.driver.info.transaction_status != TransactionStatus.IDLE:
                    # The savepoint stays, as one rolled back to does.
                    return execute("ROLLBACK", None, False, context)
                return None
        if self.holding and (
            self.held or many or sql.lstrip()[:6].upper() != "SELECT" or _LOCKING_READ.search(sql)
        ):
            self.transaction_open()
        return execute(sql, params, many, context)


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


@cache
def _insert_sql() -> str:
    table = connection.ops.quote_name(IdempotencyKey._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(name) for name in _KEPT_COLUMNS)
    placeholders = ", ".join(["%s"] * len(_KEPT_COLUMNS))
    return f"INSERT INTO {table} ({columns}) VALUES ({placeholders})"


@cache
def _keep_sql() -> str:
    table = connection.ops.quote_name(IdempotencyKey._meta.db_table)
    updates = ", ".join(
        f"{connection.ops.quote_name(name)} = excluded.{connection.ops.quote_name(name)}"
        for name in _KEPT_COLUMNS
    )
    # An expired row counts as absent: it is replaced. Any other row is the
    # twin's, and nothing is returned.
    return (
        f"{_insert_sql()} ON CONFLICT (scope, key) DO UPDATE SET {updates}"
        f" WHERE {table}.expires_at <= excluded.created_at RETURNING id"
    )


def _kept_params(
    db: BaseDatabaseWrapper, *, scope: str, key: str, fingerprint: str, response: HttpResponse
) -> list[Any]:
    """The row of the kept answer, as _KEPT_COLUMNS' parameters, adapted as
    the fields' get_db_prep_save adapts them (without their checks: the
    values are ours)."""
    now = timezone.now()
    ops = db.ops
    headers = {name: response[name] for name in KEPT_HEADERS if name in response}
    return [
        scope,
        key,
        fingerprint,
        response.status_code,
        # Encrypted like the secrets at rest: it may hold one (POST /users
        # answers with a user key).
        secret_seal(response.content),
        ops.adapt_json_value(headers, None),
        ops.adapt_datetimefield_value(now),
        ops.adapt_datetimefield_value(now + timedelta(hours=settings.IDEMPOTENCY_KEY_TTL_HOURS)),
    ]


def _answer_keep(
    *,
    db: BaseDatabaseWrapper,
    scope: str,
    key: str,
    fingerprint: str,
    response: HttpResponse,
) -> bool:
    """Keep the answer, in the transaction that made what it describes; False
    when a twin's is kept already (on PostgreSQL this waits for the twin's
    transaction, holding the key, to end)."""
    params = _kept_params(db, scope=scope, key=key, fingerprint=fingerprint, response=response)
    with db.cursor() as cursor:
        cursor.execute(_keep_sql(), params)
        return cursor.fetchone() is not None


def _answer_keep_with_rows(
    db: BaseDatabaseWrapper,
    rows: list[Statement],
    *,
    scope: str,
    key: str,
    fingerprint: str,
    response: HttpResponse,
) -> bool:
    """Keep the answer with the rows it describes in one statement, atomic
    by itself (PostgreSQL, out of a transaction); False when the key's answer
    is kept already: the statement then fails on the key's unique
    constraint, after waiting for a twin's statement holding it to end, and
    writes none of the rows. An expired row is deleted, and the statement
    sent again."""
    params = _kept_params(db, scope=scope, key=key, fingerprint=fingerprint, response=response)
    statement = one_statement([*rows, (_insert_sql(), params)])
    for attempt in range(2):
        try:
            with db.cursor() as cursor:
                cursor.execute(*statement)
            return True
        except (IntegrityError, DataError) as error:
            if _constraint(error) != IDEMPOTENCY_KEY_UNIQUE:
                raise _RunAgain() from error
        if attempt or not _expired_key_delete(scope=scope, key=key):
            return False
    return False


def _constraint(error: Exception) -> str | None:
    """The constraint a database error names (psycopg's diagnostics), if any."""
    diagnostics = getattr(error.__cause__, "diag", None)
    return getattr(diagnostics, "constraint_name", None)


def _expired_key_delete(*, scope: str, key: str) -> bool:
    """Delete the key's row if it has expired; whether there was one."""
    expired = IdempotencyKey.objects.filter(scope=scope, key=key, expires_at__lte=timezone.now())
    return expired.delete()[0] > 0
