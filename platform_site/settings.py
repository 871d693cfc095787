"""Settings, all read from the environment through one `env` object.

Every value has an embedded default so that a fresh clone runs with no server
installed: SQLite (WAL, immediate transactions) and Celery's filesystem broker,
both under DATA_DIR. DATABASE_URL and CELERY_BROKER_URL switch to PostgreSQL
and Redis with no code change.
"""

import ipaddress
import os
import secrets
import tempfile
from collections.abc import Callable
from pathlib import Path

import environ
from cryptography.fernet import Fernet

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

DATA_DIR = Path(env.str("DATA_DIR", default=str(BASE_DIR / "var"))).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _persistent_secret(name: str, generate: Callable[[], str]) -> str:
    # Web, worker and beat must share each key, and it must survive restarts;
    # a generated key kept in the data folder gives both. It is written aside
    # (readable by its owner only) and linked into place, which fails if the
    # file exists: processes starting at once all read the one that won,
    # never a half-written one nor one that another process then replaces.
    key_file = DATA_DIR / name
    if not key_file.exists():
        handle, draft = tempfile.mkstemp(dir=DATA_DIR, prefix=f".{name}.")
        with os.fdopen(handle, "w") as file:
            file.write(generate())
        try:
            os.link(draft, key_file)
        except FileExistsError:
            pass
        finally:
            os.unlink(draft)
    return key_file.read_text().strip()


# Signs pagination tokens.
SECRET_KEY = env.str("SECRET_KEY", default="") or _persistent_secret(
    "secret_key", lambda: secrets.token_urlsafe(50)
)
# Fernet keys of the secrets stored encrypted (platform_site/foundation/secret_fields.py):
# the first encrypts, every one decrypts. Losing them loses those secrets.
SECRET_ENCRYPTION_KEYS: list[str] = env.list("SECRET_ENCRYPTION_KEYS", default=[]) or [
    _persistent_secret("secret_encryption_key", lambda: Fernet.generate_key().decode())
]
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

PUBLIC_BASE_URL = env.str("PUBLIC_BASE_URL", default="http://127.0.0.1:8000").rstrip("/")
# Where clients reach the chat interface; the routes are always served under /chat.
CHAT_URL = env.str("CHAT_URL", default=f"{PUBLIC_BASE_URL}/chat").rstrip("/")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "corsheaders",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "bots",
    "events",
    "files",
    "chat",
    "adminapi",
    "platform_site.backoffice",
    "platform_site.demo",
]

MIDDLEWARE = [
    # Outermost: every answer gets its request id, its metrics and its access
    # log line, whatever answered it.
    "platform_site.observability.request_observation.RequestObservationMiddleware",
    # First, so that every answer on a chat route carries CORS headers, even a
    # 413 from the next one: a browser can then read the error.
    "corsheaders.middleware.CorsMiddleware",
    "platform_site.api.middleware.BodySizeLimitMiddleware",
    "platform_site.api.middleware.RejectNulMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "platform_site.api.middleware.BrowserPagesOnly",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
]
# Only for the Django admin and static files, not for the JSON API (above).
BROWSER_MIDDLEWARE = [
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
API_PATH_PREFIXES = ("/v1/", "/chat/", "/healthz", "/readyz", "/metrics")
# Where signed upload and download URLs of files point (no Authorization: the
# URL itself is the credential).
FILE_UPLOAD_PATH = "/v1/uploads/"
FILE_DOWNLOAD_PATH = "/v1/downloads/"
# The admin looks for these three in MIDDLEWARE; they run, through BrowserPagesOnly.
SILENCED_SYSTEM_CHECKS = ["admin.E408", "admin.E409", "admin.E410"]

ROOT_URLCONF = "platform_site.urls"
WSGI_APPLICATION = "platform_site.wsgi.application"
ASGI_APPLICATION = "platform_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{DATA_DIR / 'platform.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {
        # Web, worker and beat write at once: WAL lets readers go on during a
        # write, IMMEDIATE takes the write lock up front so a transaction never
        # fails half-way on a lock upgrade, and busy_timeout waits for it.
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": (
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=20000;"
        ),
    }
    # A file, not memory: the worker processes that integration tests start
    # must see the same test database.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test_platform.sqlite3")}
else:
    # A pool of connections per process (psycopg's, through Django): a
    # request takes one at its first query and gives it back when it ends.
    # Persistent connections (CONN_MAX_AGE) would not do under ASGI, where
    # every request runs in a thread of its own that dies with it, taking
    # its connection out of use but not closing it.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # Off by default: a check costs every request a round trip. Without it, a
    # connection broken by a database restart fails one request, and the pool
    # drops it when it comes back.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = env.bool(
        "DATABASE_CONN_HEALTH_CHECKS", default=False
    )
    # Off by default: measured (BENCHMARKS.md §21), preparing statements made
    # writes about 10 % cheaper, but PostgreSQL then chose generic plans for
    # the filtered event lists, which read every event of a bot for a filter
    # matching nothing (7x on a small database), and forced generic plans
    # made the claim of due events 18x slower on 10M events.
    _PREPARE_THRESHOLD = env.str("DATABASE_PREPARE_THRESHOLD", default="")
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            # Parameters travel apart from the SQL (no quoting on the client).
            "server_side_binding": env.bool("DATABASE_SERVER_SIDE_BINDING", default=True),
            # A statement run this many times on a connection is prepared
            # there: parsed once, and planned once where PostgreSQL finds a
            # generic plan as good as one made for the values.
            "prepare_threshold": int(_PREPARE_THRESHOLD) if _PREPARE_THRESHOLD else None,
            "pool": {
                # Opened on first use, then kept. (Celery's worker processes
                # keep a persistent connection instead: see below.)
                "min_size": env.int("DATABASE_POOL_MIN_SIZE", default=1),
                # The most queries a process runs at once: uvicorn gives each
                # request a thread of its own, a gunicorn gthread worker one of
                # its threads. Idle ones above the minimum close after 10 minutes.
                "max_size": env.int("DATABASE_POOL_MAX_SIZE", default=8),
                # Seconds a request waits for a connection (all in use, or the
                # database unreachable) before it fails.
                "timeout": env.float("DATABASE_POOL_TIMEOUT", default=10.0),
            },
        }
    )
# Celery's prefork worker processes keep one persistent connection each
# instead (platform_site/server/worker_connections.py), for this many seconds.
DATABASE_WORKER_CONN_MAX_AGE = env.int("DATABASE_WORKER_CONN_MAX_AGE", default=600)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
WHITENOISE_USE_FINDERS = True
MEDIA_ROOT = DATA_DIR / "media"

# Files' bytes: a folder under DATA_DIR, or an S3-compatible bucket when
# FILES_S3_BUCKET is set (credentials from the usual AWS_* variables).
FILES_S3_BUCKET = env.str("FILES_S3_BUCKET", default="")
_files_storage: dict[str, object] = (
    {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": FILES_S3_BUCKET,
            "endpoint_url": env.str("FILES_S3_ENDPOINT_URL", default="") or None,
            "region_name": env.str("FILES_S3_REGION", default="") or None,
            "location": env.str("FILES_S3_PREFIX", default=""),
            "file_overwrite": False,
            "default_acl": None,
        },
    }
    if FILES_S3_BUCKET
    else {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(DATA_DIR / "files")},
    }
)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "files": _files_storage,
}
# An upload URL takes at most this many bytes (the size a file announces).
FILE_UPLOAD_MAX_SIZE = env.int("FILE_UPLOAD_MAX_SIZE", default=1024 * 1024 * 1024)
# Indexing reads files up to this size; a bigger one ends indexing_failed.
FILE_INDEXING_MAX_SIZE = env.int("FILE_INDEXING_MAX_SIZE", default=95 * 1024 * 1024)
# Passages are at most this many characters unless a file asks for another
# length (indexing.configuration.chunking.maximumChunkLength, 100 to 5,000).
FILE_PASSAGE_MAX_LENGTH = env.int("FILE_PASSAGE_MAX_LENGTH", default=1000)
# Signed upload and download URLs expire after this many seconds.
FILE_UPLOAD_URL_TTL = env.int("FILE_UPLOAD_URL_TTL", default=3600)
# A file an end user sends through the official webchat (POST {chat}/…/files), at most.
CHAT_FILE_MAX_SIZE = env.int("CHAT_FILE_MAX_SIZE", default=10 * 1024 * 1024)
FILE_DOWNLOAD_URL_TTL = env.int("FILE_DOWNLOAD_URL_TTL", default=3600)
# An indexing run is stopped after this many seconds and the file fails; a run
# lost with its worker is queued again, up to this many attempts in all.
FILE_INDEXING_TIME_LIMIT = env.int("FILE_INDEXING_TIME_LIMIT", default=600)
FILE_INDEXING_MAX_ATTEMPTS = env.int("FILE_INDEXING_MAX_ATTEMPTS", default=3)
FILE_HOUSEKEEPING_INTERVAL = env.float("FILE_HOUSEKEEPING_INTERVAL", default=60.0)  # seconds
# Semantic search (docs/guides/files.md): on when the `semantic` extra
# is installed; false ranks by words alone and loads no model.
FILE_SEARCH_SEMANTIC = env.bool("FILE_SEARCH_SEMANTIC", default=True)
# Indexing embeds a file of up to this many passages in the same pass; a
# longer one is searchable by its words when indexed, by meaning once the
# worker has embedded it (docs/guides/files.md).
FILE_EMBEDDING_INLINE_MAX = env.int("FILE_EMBEDDING_INLINE_MAX", default=10_000)
# Threads of one embedding run (0: one per core).
FILE_SEARCH_EMBEDDING_THREADS = env.int("FILE_SEARCH_EMBEDDING_THREADS", default=0)
# Files' vectors each web process keeps in memory (int8 + float16: 1.1 kB a passage);
# a bot's vectors beyond it are read from the database at every search.
FILE_SEARCH_VECTOR_CACHE_MB = env.int("FILE_SEARCH_VECTOR_CACHE_MB", default=512)

# Request bodies: the middleware enforces the per-interface limits of the
# contract; Django's own ceiling only has to stay out of its way.
RUNTIME_BODY_LIMIT = 1024 * 1024
ADMIN_BODY_LIMIT = 50 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = ADMIN_BODY_LIMIT

# What the web server (platform_site/server/http_protocol.py) takes from a client
# before a view sees the request, so that the service is safe without a proxy
# in front. A request's head (request line and headers, in bytes as sent):
# at most HTTP_MAX_HEADER_BYTES (431 above), HTTP_MAX_HEADERS header lines
# (431) and a target of HTTP_MAX_REQUEST_LINE bytes (414). Time: the head must
# arrive within HTTP_HEADERS_TIMEOUT seconds of its first byte, and a body
# must keep coming: a silence of HTTP_BODY_TIMEOUT seconds, or less than
# HTTP_BODY_MIN_RATE bytes a second on average past that grace, is answered
# 408. A connection idle between requests (or before its first) is closed
# after HTTP_KEEP_ALIVE_TIMEOUT seconds.
HTTP_MAX_HEADER_BYTES = env.int("HTTP_MAX_HEADER_BYTES", default=32 * 1024)
HTTP_MAX_HEADERS = env.int("HTTP_MAX_HEADERS", default=100)
HTTP_MAX_REQUEST_LINE = env.int("HTTP_MAX_REQUEST_LINE", default=8 * 1024)
HTTP_HEADERS_TIMEOUT = env.float("HTTP_HEADERS_TIMEOUT", default=10.0)
HTTP_BODY_TIMEOUT = env.float("HTTP_BODY_TIMEOUT", default=20.0)
HTTP_BODY_MIN_RATE = env.int("HTTP_BODY_MIN_RATE", default=1024)
HTTP_KEEP_ALIVE_TIMEOUT = env.float("HTTP_KEEP_ALIVE_TIMEOUT", default=5.0)

REST_FRAMEWORK = {
    # Deny by default: a view that names no authenticator and permission gets none.
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_PARSER_CLASSES": ["platform_site.api.parsers.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["platform_site.api.renderers.FastJSONRenderer"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "platform_site.api.negotiation.AlwaysJSONNegotiation",
    "EXCEPTION_HANDLER": "platform_site.api.exception_handler.handle_exception",
    "DEFAULT_SCHEMA_CLASS": "platform_site.api.schema.ApiAutoSchema",
    "DEFAULT_PAGINATION_CLASS": None,
    "UNICODE_JSON": True,
    "COMPACT_JSON": True,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Bot platform API",
    "VERSION": "1",
    "DESCRIPTION": (
        "The runtime API (Bearer token + x-bot-id), the admin API (Bearer token +"
        " x-workspace-id) and the chat interface (x-user-key). Every rule the server"
        " enforces on a request is stated here; requests that keep to it are not refused"
        " for their shape, and any other is refused with the one error body. Strings may"
        " not hold NUL (U+0000) or lone surrogates, and JSON is nested at most 64 levels."
    ),
    "SERVE_INCLUDE_SCHEMA": False,
    # JSON Schema 2020-12: `propertyNames` and `const` state what 3.0 cannot.
    "OAS_VERSION": "3.1.0",
    # Request bodies are components of their own: a field that refuses "" says minLength 1.
    "ENFORCE_NON_BLANK_FIELDS": True,
    # A PATCH body has required fields like any other (patchState's payload):
    # it is not DRF's partial update of a resource.
    "COMPONENT_SPLIT_PATCH": False,
    "ENUM_GENERATE_CHOICE_DESCRIPTION": False,
    # Enums stay where they are used: each payload's `type` has its own.
    "POSTPROCESSING_HOOKS": [
        "chat.openapi.add_live_stream",
        "platform_site.api.schema.postprocess_schema",
    ],
    "TAGS": [
        {"name": "runtime", "description": "What a bot calls: Bearer token and x-bot-id"},
        {"name": "admin", "description": "Administration: Bearer token and x-workspace-id"},
        {"name": "chat", "description": "What a bot's end users call: x-user-key"},
        {"name": "signed URLs", "description": "Upload and download URLs that are credentials"},
        {"name": "service", "description": "Health probes"},
    ],
    # /docs: Swagger UI's files come from drf-spectacular-sidecar, through
    # the static files, and the page calls nothing else on the internet (no
    # validator badge): it works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
}

# Browsers call the chat interface from any origin, and upload and download
# the files of its users at their signed URLs; nothing else is cross-origin.
CORS_URLS_REGEX = r"^/(chat/|v1/uploads/|v1/downloads/).*$"
CORS_ALLOW_ALL_ORIGINS = True
# The official webchat sends `timeout` with its streams' requests and
# `x-admin-secret` to have user keys made (`users/key`).
CORS_ALLOW_HEADERS = [
    "x-user-key",
    "content-type",
    "idempotency-key",
    "x-request-id",
    "timeout",
    "x-admin-secret",
    # Sent with an upload by the official webchat (S3's tagging header): ignored.
    "x-amz-tagging",
]
# A browser client may read where it stands against its rate limits, and the
# id its request is logged under.
CORS_EXPOSE_HEADERS = [
    "RateLimit",
    "RateLimit-Policy",
    "Retry-After",
    "Idempotent-Replayed",
    "X-Request-Id",
]
CORS_ALLOW_METHODS = ["GET", "POST", "PUT", "DELETE", "OPTIONS"]
CORS_PREFLIGHT_MAX_AGE = 86400

PAGE_SIZE_DEFAULT = 20
PAGE_SIZE_MAX = 200

# Celery: one broker URL; the embedded default is a folder under DATA_DIR.
# A host is named so that kombu does not warn that it supplies one.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://localhost//")
if CELERY_BROKER_URL.startswith("filesystem://"):
    _queue_dir = DATA_DIR / "broker" / "queue"
    _processed_dir = DATA_DIR / "broker" / "processed"
    _control_dir = DATA_DIR / "broker" / "control"
    for _folder in (_queue_dir, _processed_dir, _control_dir):
        _folder.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_queue_dir),
        "data_folder_out": str(_queue_dir),
        "processed_folder": str(_processed_dir),
        "control_folder": str(_control_dir),
        "store_processed": False,
        # The worker looks for new message files this often (kombu's default: 1 s).
        "polling_interval": 0.1,
    }
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
# One queue name for every task; processes that share a broker but not a
# database (a test run beside `make run`) keep apart by using another.
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_QUEUE", default="platform")

# Event delivery. The database says what is due: every Celery worker process
# runs a delivery engine (events/engine/) that claims due events from it.
# Requests in flight per worker process, and to one bot (its share: a slow or
# failing webhook holds at most that many, fewer once it fails).
EVENT_DELIVERY_CONCURRENCY = env.int("EVENT_DELIVERY_CONCURRENCY", default=500)
EVENT_DELIVERY_PER_BOT = env.int("EVENT_DELIVERY_PER_BOT", default=100)
# A worker process claims events when they fall due (each claim tells it when
# the next one does); it also looks at least this often (seconds), for
# events created meanwhile by a process that could not wake it.
EVENT_DISPATCH_INTERVAL = env.float("EVENT_DISPATCH_INTERVAL", default=0.25)
# Rows claimed per SELECT … FOR UPDATE SKIP LOCKED, at most.
EVENT_DISPATCH_BATCH = env.int("EVENT_DISPATCH_BATCH", default=1000)
# On PostgreSQL, the delivery engine's transactions (claims and outcomes)
# commit without waiting for the disk. If PostgreSQL itself crashes, the last
# fraction of a second of them may be lost: those events are delivered again,
# as at-least-once delivery allows. Set to false to wait for every commit.
EVENT_DELIVERY_ASYNC_COMMIT = env.bool("EVENT_DELIVERY_ASYNC_COMMIT", default=True)
# Seconds between two log lines of each worker process's deliveries
# (claimed, sent, in flight, claim lag).
EVENT_DELIVERY_REPORT_INTERVAL = env.float("EVENT_DELIVERY_REPORT_INTERVAL", default=60.0)
# A claimed event is due again after this long, should its worker die.
EVENT_LEASE_SECONDS = env.float("EVENT_LEASE_SECONDS", default=60.0)
EVENT_DELIVERY_TIMEOUT = env.float("EVENT_DELIVERY_TIMEOUT", default=10.0)
# Retries: exponential from the base, capped, with jitter; an event fails once
# a retryable failure comes this long after its first attempt.
EVENT_RETRY_BASE_SECONDS = env.float("EVENT_RETRY_BASE_SECONDS", default=5.0)
EVENT_RETRY_MAX_DELAY_SECONDS = env.float("EVENT_RETRY_MAX_DELAY_SECONDS", default=2 * 3600.0)
EVENT_RETRY_WINDOW_SECONDS = env.float("EVENT_RETRY_WINDOW_SECONDS", default=24 * 3600.0)
# Finished events older than their workspace's retention are deleted this often
# (seconds), this many per transaction.
EVENT_RETENTION_INTERVAL = env.float("EVENT_RETENTION_INTERVAL", default=3600.0)
EVENT_RETENTION_BATCH = env.int("EVENT_RETENTION_BATCH", default=5000)
# On PostgreSQL events live in partitions of this many days each
# (events/services/partitions.py: fewer days, finer retention, more
# partitions for every list to plan); beat makes them this many days ahead,
# checking this often (seconds).
EVENT_PARTITION_DAYS = env.int("EVENT_PARTITION_DAYS", default=7)
EVENT_PARTITIONS_AHEAD_DAYS = env.int("EVENT_PARTITIONS_AHEAD_DAYS", default=7)
EVENT_PARTITIONS_INTERVAL = env.float("EVENT_PARTITIONS_INTERVAL", default=3600.0)
if EVENT_PARTITION_DAYS < 1 or EVENT_PARTITIONS_AHEAD_DAYS < 1:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("EVENT_PARTITION_DAYS and EVENT_PARTITIONS_AHEAD_DAYS must be >= 1")
# After a rotation, the old secret signs deliveries beside the new one this long.
WEBHOOK_SECRET_OVERLAP_SECONDS = env.float("WEBHOOK_SECRET_OVERLAP_SECONDS", default=24 * 3600.0)

# Idempotency-Key (platform_site/api/idempotency.py): a POST's first 2xx answer is replayed
# to retries with the same key for this many hours.
IDEMPOTENCY_KEY_TTL_HOURS = env.float("IDEMPOTENCY_KEY_TTL_HOURS", default=24.0)
# Expired keys are deleted this often (seconds), this many per statement.
IDEMPOTENCY_PURGE_INTERVAL = env.float("IDEMPOTENCY_PURGE_INTERVAL", default=3600.0)
IDEMPOTENCY_PURGE_BATCH = env.int("IDEMPOTENCY_PURGE_BATCH", default=5000)

# A user the chat interface made for a client without a key (POST users) that
# never took part in a conversation is deleted once older than this many days,
# if nothing refers to it (chat/services/user_purge.py): its key then gets a
# 401 and the client makes a new user. Looked for this often (seconds), this
# many deleted per transaction.
CHAT_ANONYMOUS_USER_MAX_AGE_DAYS = env.float("CHAT_ANONYMOUS_USER_MAX_AGE_DAYS", default=7.0)
CHAT_ANONYMOUS_USER_PURGE_INTERVAL = env.float("CHAT_ANONYMOUS_USER_PURGE_INTERVAL", default=3600.0)
CHAT_ANONYMOUS_USER_PURGE_BATCH = env.int("CHAT_ANONYMOUS_USER_PURGE_BATCH", default=1000)
if CHAT_ANONYMOUS_USER_MAX_AGE_DAYS <= 0:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("CHAT_ANONYMOUS_USER_MAX_AGE_DAYS must be more than 0")


# --- Live stream ------------------------------------------------------------
# GET {chat_url}/{webhookId}/conversations/{id}/listen (chat/live/). Changes
# reach listeners through Redis publish/subscribe, so that one made in any web
# process or worker reaches the listeners of every web process. Without Redis
# an in-process bus carries them: one web process only, and changes made by a
# Celery worker do not stream.
LIVE_STREAM_REDIS_URL = env.str(
    "LIVE_STREAM_REDIS_URL",
    default=CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else "",
)
# Where web processes wake the workers' delivery engines (events/engine/wakeups.py):
# a Redis list; empty, a Celery task through the broker.
EVENT_WAKE_REDIS_URL = env.str("EVENT_WAKE_REDIS_URL", default=LIVE_STREAM_REDIS_URL)
# Seconds of silence after which a listener gets a ping: clients drop a stream
# that is silent for 60 s, and the contract promises one at least every 30 s.
LIVE_STREAM_HEARTBEAT = env.float("LIVE_STREAM_HEARTBEAT", default=15.0)
if not 0 < LIVE_STREAM_HEARTBEAT < 30:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("LIVE_STREAM_HEARTBEAT must be more than 0 and less than 30 seconds")
# Messages a listener may fall behind by before it is dropped (its client
# reconnects): a slow reader costs this much memory, and never delays others.
LIVE_STREAM_QUEUE_SIZE = env.int("LIVE_STREAM_QUEUE_SIZE", default=256)
# uvicorn (and gunicorn) start this many web processes. The in-process bus
# reaches the listeners of its own process only: more than one needs Redis.
if env.int("WEB_CONCURRENCY", default=1) > 1 and not LIVE_STREAM_REDIS_URL:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        "WEB_CONCURRENCY is more than 1, so the live stream needs Redis: set"
        " LIVE_STREAM_REDIS_URL (or a redis:// CELERY_BROKER_URL)"
    )
# --- end of Live stream -----------------------------------------------------

# The throttles of every API view that names none (platform_site/api/views.py):
# each counts the requests it applies to, in one round trip for all of their
# policies; a view they do not apply to (health probes) is not limited. Not
# DRF's DEFAULT_THROTTLE_CLASSES, which DRF imports with its views, before the
# apps these live in are ready.
API_THROTTLE_CLASSES = [
    "platform_site.api.token_throttle.TokenRateLimit",
    "chat.throttles.ChatRateLimit",
]
# Rate limits (platform_site/api/rate_limit.py): per workspace and per token on
# the runtime and admin API, per chat user and per client address on the chat
# interface; the workspace's limits are its settings, in the Django admin.
RATE_LIMIT_ENABLED = env.bool("RATE_LIMIT_ENABLED", default=True)
# Where every web process counts together; empty: in each process's memory,
# which is exact only with one web process (the embedded default).
RATE_LIMIT_REDIS_URL = env.str("RATE_LIMIT_REDIS_URL", default=LIVE_STREAM_REDIS_URL)
# Requests a minute one token may make, whatever the workspace (a token's own
# setting in the Django admin overrides it).
TOKEN_RATE_LIMIT_PER_MINUTE = env.int("TOKEN_RATE_LIMIT_PER_MINUTE", default=3000)
# The limits a new workspace starts with (staff change each workspace's in the
# Django admin): its tokens together; one chat user; one client address on
# the chat interface of its bots.
WORKSPACE_RATE_LIMIT_PER_MINUTE = env.int("WORKSPACE_RATE_LIMIT_PER_MINUTE", default=600)
CHAT_USER_RATE_LIMIT_PER_MINUTE = env.int("CHAT_USER_RATE_LIMIT_PER_MINUTE", default=120)
CHAT_ADDRESS_RATE_LIMIT_PER_MINUTE = env.int("CHAT_ADDRESS_RATE_LIMIT_PER_MINUTE", default=600)
# The chat interface makes users for clients that show no credential (POST
# users, the webchat's initialize without a key) and for signed keys naming
# nobody yet (users/get-or-create). Each such request also counts against
# two limits of its own (defaults a new workspace starts with): users made a
# minute from one client address, tight because a browser needs one user and
# keeps its key, so 10 leaves room for a few people behind one NAT where the
# general 600 let one address make 864,000 a day; and users made an hour for
# each bot whatever the address, which bounds the rows many addresses together
# can add (a burst of the limit, then one every 3600 / limit seconds).
CHAT_ADDRESS_USER_CREATION_RATE_LIMIT_PER_MINUTE = env.int(
    "CHAT_ADDRESS_USER_CREATION_RATE_LIMIT_PER_MINUTE", default=10
)
CHAT_USER_CREATION_RATE_LIMIT_PER_HOUR = env.int(
    "CHAT_USER_CREATION_RATE_LIMIT_PER_HOUR", default=1000
)

# What a bearer token, a chat webhook id or a user key stands for is cached in
# each process (platform_site/foundation/credential_cache.py) for at most this many seconds, and
# for at most 1 s unless the process has been subscribed to invalidations on
# LIVE_STREAM_REDIS_URL since the answer was read (then a revocation reaches it
# at once). 0 turns the cache off: every request reads the database.
CREDENTIALS_CACHE_SECONDS = env.float("CREDENTIALS_CACHE_SECONDS", default=60.0)

# --- Metrics and logs -------------------------------------------------------
# Prometheus metrics (platform_site/observability/metrics.py), counted in every process and
# summed over all of them at GET /metrics: each process writes its own files
# in this folder, which all the service's processes on a host must share
# (and which should be emptied when the whole service starts: `make run`
# does). Settings put it in the environment, where prometheus-client and the
# processes started from this one find it.
METRICS_ENABLED = env.bool("METRICS_ENABLED", default=True)
METRICS_DIR = Path(env.str("PROMETHEUS_MULTIPROC_DIR", default=str(DATA_DIR / "metrics")))
if METRICS_ENABLED:
    METRICS_DIR.mkdir(parents=True, exist_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(METRICS_DIR)
# Who may read /metrics: these networks (the client address as uvicorn has
# it, see FORWARDED_ALLOW_IPS), and anyone with this bearer token.
METRICS_ALLOW_NETWORKS = env.list("METRICS_ALLOW_NETWORKS", default=["127.0.0.0/8", "::1/128"])
for _network in METRICS_ALLOW_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            f"METRICS_ALLOW_NETWORKS: {_network!r} is not a network (10.0.0.0/8, ::1/128)"
        ) from None
METRICS_BEARER_TOKEN = env.str("METRICS_BEARER_TOKEN", default="")
# The proxies whose forwarded headers the server takes (serve.py sets it from
# --forwarded-allow-ips): without any, a forwarded request's address is its
# proxy's, which /metrics does not take for the client's.
FORWARDED_ALLOW_IPS = env.str("FORWARDED_ALLOW_IPS", default="")
# Read at each scrape, besides the processes' own metrics.
METRICS_COLLECTORS = ["events.metrics.DeliveryBacklogCollector"]
# The due backlog is counted up to this many events at each scrape, so that
# a scrape costs the same whatever the backlog (events/metrics.py).
METRICS_BACKLOG_COUNT_LIMIT = env.int("METRICS_BACKLOG_COUNT_LIMIT", default=10_000)
if METRICS_BACKLOG_COUNT_LIMIT < 1:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("METRICS_BACKLOG_COUNT_LIMIT must be at least 1")
# A host that runs workers and no web process: a worker's main process
# serves the host's metrics there (no access control: keep it on loopback
# or a private network).
WORKER_METRICS_PORT = env.int("WORKER_METRICS_PORT", default=0)
WORKER_METRICS_HOST = env.str("WORKER_METRICS_HOST", default="127.0.0.1")

# Log lines (platform_site/observability/log_config.py): readable text by default, one JSON
# object per line with LOG_FORMAT=json. Either way each line carries what it
# is about: the request id, an error's id, an event, its bot and attempt.
LOG_FORMAT = env.str("LOG_FORMAT", default="text")
if LOG_FORMAT not in ("text", "json"):
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("LOG_FORMAT must be text or json")
# One line per request (method, path, status, duration); WEB_ACCESS_LOG=0
# (or serve's --no-access-log) turns it off.
WEB_ACCESS_LOG = env.bool("WEB_ACCESS_LOG", default=True)

# Lines below WARNING are written in batches, at most this many seconds
# after they are made (platform_site/observability/log_handler.py); 0 writes each at once.
LOG_FLUSH_SECONDS = env.float("LOG_FLUSH_SECONDS", default=0.05)

LOGGING_CONFIG = "platform_site.observability.log_config.configure"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "structured": {
            "()": "platform_site.observability.log_config.formatter",
            "json": LOG_FORMAT == "json",
        }
    },
    "filters": {"expired_wakeups": {"()": "platform_site.observability.log_config.ExpiredWakeups"}},
    "handlers": {
        "console": {
            "class": "platform_site.observability.log_handler.BatchedStreamHandler",
            "formatter": "structured",
            "flush_seconds": LOG_FLUSH_SECONDS,
        }
    },
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        # The server's own news (started, stopping) and the access log have
        # their own switches, not LOG_LEVEL's (WEB_ACCESS_LOG).
        "uvicorn.error": {"level": "INFO"},
        "platform_site.access": {"level": "INFO"},
        # Celery's pool (billiard) logs here and stops it from propagating:
        # its lines get the console handler here, not a raw print.
        "multiprocessing": {"handlers": ["console"], "propagate": False},
        # Our handler logs every error with its id; Django's duplicate would
        # print the same failure twice without the id.
        "django.request": {"level": "CRITICAL", "propagate": True},
        # A request with a Host not in ALLOWED_HOSTS: the 400 handler logs it,
        # in one line at WARNING; Django's would be a trace at ERROR.
        "django.security.DisallowedHost": {"level": "CRITICAL", "propagate": True},
        # Delivery wake-ups run by the hundred a second: a line for each
        # task would drown the log. Failures are still logged (at ERROR by
        # Celery), and each worker process reports its deliveries itself.
        "celery.app.trace": {"level": "WARNING"},
        "celery.worker.strategy": {"level": "WARNING"},
        # Expired wake-ups left in the broker while no worker ran: not a
        # line each when a worker starts (platform_site/observability/log_config.py).
        "celery.worker.request": {"filters": ["expired_wakeups"]},
    },
}
# --- end of Metrics and logs -------------------------------------------------

# --- Dashboard ---
# The Django admin's home page is a dashboard (platform_site/backoffice/dashboard/), under the
# platform's name rather than Django's.
PLATFORM_NAME = env.str("PLATFORM_NAME", default="Bot platform")
# It reads per-minute rollups (events/rollups/), which beat recomputes this
# often (seconds): the page then costs the same few queries however many
# events there are. They are kept this many hours (at least the day the page
# shows); a first run, or one after beat was stopped, looks back at most
# DASHBOARD_ROLLUP_BACKFILL_HOURS.
DASHBOARD_ROLLUP_INTERVAL = env.float("DASHBOARD_ROLLUP_INTERVAL", default=60.0)
DASHBOARD_ROLLUP_KEEP_HOURS = env.float("DASHBOARD_ROLLUP_KEEP_HOURS", default=48.0)
DASHBOARD_ROLLUP_BACKFILL_HOURS = env.float("DASHBOARD_ROLLUP_BACKFILL_HOURS", default=24.0)
if DASHBOARD_ROLLUP_KEEP_HOURS < 24:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        "DASHBOARD_ROLLUP_KEEP_HOURS must be at least 24: the dashboard shows a day"
    )
# --- end of Dashboard ---

# --- Beat schedule ---
# Every periodic job, here and nowhere else: a task of an app's tasks.py
# (docs/development/layout.md), run every so many seconds, each run expiring when the next
# is due so that a stopped worker does not find a pile of them.


def _every(seconds: float, task: str) -> dict[str, object]:
    return {"task": task, "schedule": seconds, "options": {"expires": seconds}}


CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {
    "requeue-stalled-indexing": _every(
        FILE_HOUSEKEEPING_INTERVAL, "files.tasks.requeue_stalled_indexing"
    ),
    "embed-due-files": _every(FILE_HOUSEKEEPING_INTERVAL, "files.tasks.embed_due_files"),
    "delete-expired-files": _every(FILE_HOUSEKEEPING_INTERVAL, "files.tasks.delete_expired_files"),
    "purge-expired-events": _every(EVENT_RETENTION_INTERVAL, "events.tasks.purge_expired_events"),
    "make-event-partitions": _every(
        EVENT_PARTITIONS_INTERVAL, "events.tasks.make_event_partitions"
    ),
    "purge-expired-idempotency-keys": _every(
        IDEMPOTENCY_PURGE_INTERVAL, "bots.tasks.purge_expired_idempotency_keys"
    ),
    "purge-stale-chat-users": _every(
        CHAT_ANONYMOUS_USER_PURGE_INTERVAL, "chat.tasks.purge_stale_chat_users"
    ),
    "roll-up-dashboard": _every(DASHBOARD_ROLLUP_INTERVAL, "events.tasks.roll_up_dashboard"),
}
# --- end of Beat schedule ---
