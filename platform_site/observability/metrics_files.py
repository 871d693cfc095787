"""The metrics folder (PROMETHEUS_MULTIPROC_DIR) that every process of a host
writes its own files into, read as one.

Processes come and go (a web process restarted, a Celery child replaced, a
`manage.py` command), and each leaves files that every scrape would read
again, forever. So before a read, the files of processes that are gone are
tidied: their live gauges (open listeners) dropped, as they counted what
those processes held; their counters and histograms, which must go on
counting, added into one archive file per type and removed. Scrapes take a
shared lock to read, a tidy an exclusive one, so no read sees a file
half-folded or vanishing; a tidy that cannot have the lock at once is left
to the next scrape."""

import fcntl
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import IO
from wsgiref.simple_server import WSGIServer

from prometheus_client import start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector, CollectorRegistry

# A process's files: counter_<pid>.db, histogram_<pid>.db, gauge_livesum_<pid>.db.
_PROCESS_FILE = re.compile(r"^(counter|histogram|gauge_live\w+)_(\d+)\.db$")
# Where the folded values of processes that ended go: counter_archive.db, …
_ARCHIVE = "archive"
# A values file starts with 8 bytes: how much of it is used, and padding.
_HEADER_BYTES = 8


def metrics_folder() -> str:
    return os.environ["PROMETHEUS_MULTIPROC_DIR"]


@contextmanager
def _lock(operation: int) -> Iterator[IO[str]]:
    with open(os.path.join(metrics_folder(), ".lock"), "a") as lock_file:
        fcntl.flock(lock_file, operation)
        yield lock_file


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's
    return True


def _gone() -> list[tuple[str, int, str]]:
    """(type, pid, path) of every file whose process is gone."""
    folder = metrics_folder()
    found = []
    for name in os.listdir(folder):
        match = _PROCESS_FILE.match(name)
        if match is not None and not _alive(pid := int(match.group(2))):
            found.append((match.group(1), pid, os.path.join(folder, name)))
    return found


def _fold(kind: str, path: str) -> None:
    """Add a file's values into its type's archive, then remove it. Counters
    and histogram buckets (and sums) only ever add up. A process killed
    between the two steps would leave the file counted twice: a window of a
    few milliseconds, once per dead process."""
    if os.path.getsize(path) < _HEADER_BYTES:
        # Its process died making it (between creating and sizing the
        # file): it holds no value, and its empty header is no file to read.
        os.unlink(path)
        return
    archive = MmapedDict(os.path.join(metrics_folder(), f"{kind}_{_ARCHIVE}.db"))
    try:
        for key, value, timestamp, _ in MmapedDict.read_all_values_from_file(path):
            archived, _ = archive.read_value(key)
            archive.write_value(key, archived + value, timestamp)
    finally:
        archive.close()
    os.unlink(path)


def metrics_tidy() -> None:
    gone = _gone()
    if not gone:
        return
    try:
        with _lock(fcntl.LOCK_EX | fcntl.LOCK_NB):
            for kind, pid, path in gone:
                if kind.startswith("gauge_live"):
                    mark_process_dead(pid)
                elif os.path.exists(path):
                    _fold(kind, path)
    except BlockingIOError:
        pass  # being read or tidied: the next scrape tidies


class HostMetrics(Collector):
    """Every process's metrics on this host, summed (prometheus-client's
    MultiProcessCollector over the folder, tidied first)."""

    def collect(self) -> Iterable[Metric]:
        metrics_tidy()
        with _lock(fcntl.LOCK_SH):
            return list(MultiProcessCollector(None).collect())


def host_metrics_serve(*, port: int, host: str) -> WSGIServer:
    """The host's metrics over HTTP on a thread of this process (prometheus-
    client's server), for a worker host; answers the server, to shut down."""
    server, _ = start_http_server(port, addr=host, registry=host_registry())
    return server


def host_registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(HostMetrics())
    return registry
