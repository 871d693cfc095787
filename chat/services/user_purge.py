"""Stale anonymous chat users. A client that shows no credential may have a
user made (POST users) and never come back: such a user is `purgeable` until
it takes part in a conversation, and deleted once older than
CHAT_ANONYMOUS_USER_MAX_AGE_DAYS, if nothing refers to it.

Races. A request that makes a conversation for a user or adds them to one
clears the flag first (user_engaged), which holds the user's row until it
commits. The purge locks the rows it deletes, skipping those held (SKIP
LOCKED), and checks its conditions again in the DELETE itself, NOT EXISTS
over every table that refers to a user: what committed meanwhile is seen,
and a row written later names a user that is gone, which its foreign key
refuses (that request is answered 400 ReferenceNotFound, nothing written).
On SQLite, transactions that write take turns, which does the same."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, ForeignObjectRel, Model, OuterRef, QuerySet
from django.utils import timezone

from bots.models import User
from platform_site.foundation.credential_invalidation import credentials_changed


def user_engaged(*, user: User) -> None:
    """The user creates or joins a conversation: never purged from then on.
    Called in the transaction that does it, before it writes: the user's
    row, if still purgeable, is held until the transaction ends."""
    if "purgeable" not in user.get_deferred_fields() and not user.purgeable:
        # Read whole and not purgeable: it never becomes so again.
        return
    User.objects.filter(pk=user.pk, purgeable=True).update(purgeable=False)


def chat_users_purge_stale(*, now: datetime | None = None) -> int:
    """Delete purgeable users older than CHAT_ANONYMOUS_USER_MAX_AGE_DAYS that
    nothing refers to, CHAT_ANONYMOUS_USER_PURGE_BATCH per transaction, so a
    large purge never holds one long transaction; answers how many."""
    stale = _stale(now or timezone.now())
    size = settings.CHAT_ANONYMOUS_USER_PURGE_BATCH
    deleted = 0
    while True:
        locked, count = _delete_batch(stale, size)
        deleted += count
        if locked < size:
            return deleted


def _stale(now: datetime) -> QuerySet[User]:
    cutoff = now - timedelta(days=settings.CHAT_ANONYMOUS_USER_MAX_AGE_DAYS)
    users = User.objects.filter(purgeable=True, created_at__lt=cutoff)
    for model, field in _referring():
        users = users.filter(~Exists(model._base_manager.filter(**{field: OuterRef("pk")})))
    return users


def _referring() -> list[tuple[type[Model], str]]:
    """Every foreign key to a user, whatever its app and on_delete: their
    participations, messages (scheduled ones too), feedback, states, owned
    conversations, workflows, events. Read from the models, so a table that
    comes to refer to users keeps them too rather than losing its rows or
    failing the purge."""
    return [
        (relation.field.model, relation.field.name)
        for relation in User._meta.get_fields(include_hidden=True)
        if isinstance(relation, ForeignObjectRel) and (relation.one_to_many or relation.one_to_one)
    ]


@transaction.atomic
def _delete_batch(stale: QuerySet[User], size: int) -> tuple[int, int]:
    """How many users were locked, and how many of them deleted."""
    ids = list(
        stale.select_for_update(skip_locked=True)
        .order_by("created_at")
        .values_list("pk", flat=True)[:size]
    )
    if not ids:
        return 0, 0
    # One DELETE carrying the conditions: Django's collector would read each
    # referring table back and delete without them.
    count = stale.filter(pk__in=ids)._raw_delete(stale.db)
    if count:
        # Their keys are refused everywhere from now on.
        credentials_changed()
    return len(ids), count
