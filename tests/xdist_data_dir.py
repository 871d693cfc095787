"""A pytest plugin (`make test` loads it with `-p tests.xdist_data_dir`,
before Django's settings are read): under pytest-xdist, each worker process
gets a DATA_DIR of its own below the run's, and a metrics folder of its own,
so that the embedded defaults' SQLite files, the filesystem broker's
folders, the files storage and the Prometheus files of two workers never
mix. pytest-django gives each worker its own test database (a `_gw0`
suffix), on PostgreSQL too."""

import os
from pathlib import Path

_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker:
    _base = Path(os.environ.get("DATA_DIR") or Path(__file__).resolve().parent.parent / "var")
    os.environ["DATA_DIR"] = str(_base / _worker)
    # Set by the controller's settings (or by whoever runs the suite), and
    # inherited: a folder of the worker's own below it.
    _metrics = Path(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or _base / "metrics")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(_metrics / _worker)
