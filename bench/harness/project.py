"""The project a benchmark runs against: a throwaway PostgreSQL database and
data folder, migrated and seeded with the project's own commands, and the
Redis database its processes use as broker."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import redis
from psycopg import sql

from harness.report import log

ROOT = Path(__file__).resolve().parent.parent.parent
PYTHON = sys.executable
PG_HOST = os.environ.get("BENCH_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("BENCH_PG_PORT", "5432"))
PG_USER = os.environ.get("BENCH_PG_USER", "postgres")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/15")
# The chat benchmarks' broker and live-stream bus (and the web tier's).
CHAT_REDIS_URL = os.environ.get("BENCH_CHAT_REDIS_URL", "redis://127.0.0.1:6379/14")

# Rate limits out of reach. A benchmark measures the service as it runs, its
# rate limiter on (RATE_LIMIT_ENABLED's default), but with every quota far
# above the load it generates, so that nothing is refused: the deployment's
# default quotas (a workspace's tokens together, one token, one chat user, one
# client address, chat users made from one address and for one bot: a burst of
# 10,000,000 an hour) are raised in every process of every project, the demo
# workspace's settings made with them by seed_demo. protection.py sets its
# own limits on top of these (api.set_limits). "Out of reach": a request
# every 6 µs. (A limit over 60,000,000 a minute makes rate_limit's interval
# 0 µs, and its quota arithmetic divides by it.)
HIGH_LIMIT = 10_000_000
RATE_LIMITS_OUT_OF_REACH = {
    name: str(HIGH_LIMIT)
    for name in (
        "WORKSPACE_RATE_LIMIT_PER_MINUTE",
        "TOKEN_RATE_LIMIT_PER_MINUTE",
        "CHAT_USER_RATE_LIMIT_PER_MINUTE",
        "CHAT_ADDRESS_RATE_LIMIT_PER_MINUTE",
        "CHAT_ADDRESS_USER_CREATION_RATE_LIMIT_PER_MINUTE",
        "CHAT_USER_CREATION_RATE_LIMIT_PER_HOUR",
    )
}


def admin_dsn(dbname: str = "postgres") -> str:
    return f"host={PG_HOST} port={PG_PORT} user={PG_USER} dbname={dbname}"


def database_url(dbname: str) -> str:
    return f"postgres://{PG_USER}@{PG_HOST}:{PG_PORT}/{dbname}"


@contextlib.contextmanager
def admin_connection(dbname: str = "postgres") -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(admin_dsn(dbname), autocommit=True) as conn:
        yield conn


def _drop_database(name: str) -> None:
    with admin_connection() as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@dataclass
class Project:
    """A migrated, seeded project on its own database and data folder."""

    dbname: str
    data_dir: Path
    env: dict[str, str]
    demo: dict[str, Any] = field(default_factory=dict)

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [PYTHON, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            sys.stderr.write(done.stdout + done.stderr)
            raise RuntimeError(f"manage.py {' '.join(args)} failed ({done.returncode})")
        return done.stdout

    def connect(self, **kwargs: Any) -> psycopg.Connection[Any]:
        return psycopg.connect(admin_dsn(self.dbname), **kwargs)

    def scalar(self, query: str, params: Any = None) -> Any:
        """The first column of the first row of `query` (autocommit)."""
        with self.connect(autocommit=True) as conn:
            row = conn.execute(query, params).fetchone()
        assert row is not None
        return row[0]

    def database_connections(self) -> int:
        """PostgreSQL connections open on this project's database now."""
        with admin_connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (self.dbname,)
            ).fetchone()
            return int(row[0]) if row else 0


def django_setup(proj: Project) -> None:
    """Django set up in this process on the project's settings (the
    benchmarks that call the application's code in-process)."""
    os.environ.update(proj.env)
    import django

    django.setup(set_prefix=False)


def project_env(
    dbname: str, data_dir: Path, *, redis_url: str = REDIS_URL, sqlite: bool = False
) -> dict[str, str]:
    """The environment of a project's processes: its database (PostgreSQL's
    `dbname`, or with `sqlite` a file in `data_dir`), `redis_url` as broker,
    `data_dir` as DATA_DIR, the rate limits out of reach."""
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{data_dir}/{dbname}.sqlite3"
        if sqlite
        else database_url(dbname),
        "CELERY_BROKER_URL": redis_url,
        "DATA_DIR": str(data_dir),
        "DJANGO_SETTINGS_MODULE": "platform_site.settings",
        "LOG_LEVEL": "WARNING",
        "DEBUG": "false",
        **RATE_LIMITS_OUT_OF_REACH,
    }
    env.pop("SECRET_KEY", None)  # generated into DATA_DIR, shared by every process here
    return env


@contextlib.contextmanager
def project(
    dbname: str, *, redis_url: str = REDIS_URL, keep: bool = False, sqlite: bool = False
) -> Iterator[Project]:
    """Create database `dbname` (bench_*), migrate it, seed a demo workspace;
    drop the database and the data folder afterwards, whatever happened.
    `redis_url` is the broker of every process of the project; its rate
    limits are out of reach (RATE_LIMITS_OUT_OF_REACH). `keep`: the database
    stays afterwards, for a look at what was measured. `sqlite`: the embedded
    database instead, a file in the data folder (`connect` is PostgreSQL's)."""
    if not dbname.startswith("bench_"):
        raise ValueError("benchmark databases are named bench_*")
    data_dir = Path(tempfile.mkdtemp(prefix=f"{dbname}-"))
    env = project_env(dbname, data_dir, redis_url=redis_url, sqlite=sqlite)
    if not sqlite:
        _drop_database(dbname)
        with admin_connection() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    try:
        proj = Project(dbname=dbname, data_dir=data_dir, env=env)
        log(f"database {dbname}: migrate")
        proj.manage("migrate", "--no-input", "-v", "0")
        log(f"database {dbname}: seed_demo")
        out = proj.manage("seed_demo", "--json")
        proj.demo = json.loads(out.strip().splitlines()[-1])
        yield proj
    finally:
        try:
            if keep:
                log(f"keeping database {dbname} (--keep)")
            elif not sqlite:  # an embedded one goes with the data folder
                log(f"dropping database {dbname}")
                _drop_database(dbname)
        finally:
            shutil.rmtree(data_dir, ignore_errors=True)


@contextlib.contextmanager
def redis_forgetting(redis_url: str, patterns: list[str]) -> Iterator[redis.Redis]:
    """A client of the Redis database `redis_url`; its keys matching any of
    `patterns` deleted before and after (counters of an earlier run, a queue)."""
    client = redis.Redis.from_url(redis_url)

    def forget() -> None:
        for pattern in patterns:
            keys = list(client.scan_iter(match=pattern, count=1000))
            if keys:
                client.delete(*keys)

    forget()
    try:
        yield client
    finally:
        with contextlib.suppress(redis.RedisError):
            forget()
        client.close()


def redis_script_calls(client: redis.Redis) -> int:
    """Lua scripts the Redis server has run so far (any client of it): the
    rate limiter's one round trip is an EVALSHA."""
    stats = client.info("commandstats")
    return sum(
        int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("evalsha", "eval")
    )


def delete_queue(redis_url: str, queue: str) -> None:
    """A Celery queue and kombu's bindings of it, gone."""
    client = redis.Redis.from_url(redis_url)
    client.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
    client.close()


@contextlib.contextmanager
def run_queue(name: str, redis_url: str = CHAT_REDIS_URL) -> Iterator[str]:
    """A Celery queue of the run's own (CELERY_QUEUE for this process and the
    ones it starts: seed_demo enqueues the demo file's indexing, which no
    worker here consumes), deleted at the end."""
    queue = f"{name}-{os.getpid()}"
    os.environ["CELERY_QUEUE"] = queue
    try:
        yield queue
    finally:
        delete_queue(redis_url, queue)


@contextlib.contextmanager
def bus_project(dbname: str, *, queue: str, redis_url: str = CHAT_REDIS_URL) -> Iterator[Project]:
    """`project` whose processes use `redis_url` as broker and live-stream bus
    (a created message is published to it, listened to or not), with a Celery
    queue of the run's own."""
    with run_queue(queue, redis_url), project(dbname, redis_url=redis_url) as proj:
        proj.env["LIVE_STREAM_REDIS_URL"] = redis_url
        yield proj
