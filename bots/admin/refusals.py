"""Member changes from admin forms. The member services refuse what breaks
the owner rules; a form must show that refusal as an error, but the admin
saves only after every form validated. So validation runs the changes once
and rolls them back, holding the workspace's row lock (taken by the services
too) until the admin saves in the same transaction: the real run then meets
the same members and cannot be refused."""

from collections.abc import Callable

from django.db import transaction

from bots.services.members import lock_members
from platform_site.foundation.domain_errors import DomainError


class _RolledBack(Exception):
    pass


def refusal(workspace_id: str, changes: Callable[[], object]) -> str | None:
    """Why the services refuse `changes` (None when they would make them)."""
    # The admin's change and delete views are atomic: this lock lasts until
    # they commit what validated here.
    lock_members(workspace_id)
    try:
        with transaction.atomic():
            changes()
            raise _RolledBack
    except _RolledBack:
        return None
    except DomainError as refused:
        return refused.message
