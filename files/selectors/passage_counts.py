"""How many passages the searched files hold: the lexical ranking on
PostgreSQL bounds its work by it (files/selectors/search_bm25_postgresql.py).

Counted once per file and passages_version by each process: a file's
passages change only with a new passages_version, so a kept count stays
true (or nearly: passages replaced between reading the version and
counting are counted under the old one; the count bounds work, it answers
nothing), and the counting (an index-only scan of the file's passages) is
paid once, not at every search."""

import threading
from collections.abc import Sequence

from django.db.models import Count

from files.models import Passage
from files.selectors.searched_files import FileKey

# Files whose counts a process keeps; beyond it the oldest half goes.
KEPT_MAX = 100_000

_counts: dict[FileKey, int] = {}
_lock = threading.Lock()


def passages_counted(keys: Sequence[FileKey]) -> int:
    """The passages of the files named by `keys`, all together."""
    with _lock:
        known = {key: _counts[key] for key in keys if key in _counts}
    missing = {file_id: version for file_id, version in keys if (file_id, version) not in known}
    if missing:
        counted = dict(
            Passage.objects.filter(file_id__in=missing)
            .values_list("file_id")
            .annotate(count=Count("*"))
            .values_list("file_id", "count")
        )
        found = {(file_id, missing[file_id]): counted.get(file_id, 0) for file_id in missing}
        with _lock:
            if len(_counts) + len(found) > KEPT_MAX:
                for key in list(_counts)[: len(_counts) // 2]:
                    del _counts[key]
            _counts.update(found)
        known.update(found)
    return sum(known.values())
