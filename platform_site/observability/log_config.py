"""How log lines look: structlog renders every standard-library record, as
readable text (the default, for `make run` and a terminal) or as one JSON
object per line (LOG_FORMAT=json, for a log pipeline).

Each line carries its context without the code that logs having to pass it:
what is bound to the running request or task (structlog.contextvars:
request_id, task, task_id) and what a call passes as `extra` (error_id;
event_id, bot_id, attempt on delivery lines)."""

import logging
import logging.config
from datetime import UTC, datetime
from typing import Any

import orjson
import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

# uvicorn's own lines carry a coloured copy of their message.
_DROPPED_EXTRAS = ("color_message",)


def _drop_extras(logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
    for key in _DROPPED_EXTRAS:
        event.pop(key, None)
    return event


# Line breaks and terminal controls a client sent (a path with %0A) would
# let it forge lines of the text log, or drive the terminal showing it: C0
# and C1 controls (tab aside), DEL and the Unicode line separators are
# written escaped.
_UNPRINTABLE = str.maketrans(
    {
        **{
            code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
            for code in (*range(0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029)
            if code != 0x09
        },
        0x0A: "\\n",
        0x0D: "\\r",
    }
)


def _escaped(text: str) -> str:
    # isprintable() is False for every character the table escapes (and for
    # a tab, which it keeps): a C scan, where translate() looks up each
    # character in a dict, which was half of an access line's formatting.
    return text if text.isprintable() else text.translate(_UNPRINTABLE)


def _one_line(logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
    for key, value in event.items():
        if isinstance(value, str) and key != "exception":
            event[key] = _escaped(value)
    return event


def _json(event: EventDict, **kwargs: Any) -> str:
    # default=str: an extra that JSON cannot hold is written as its text.
    return orjson.dumps(event, default=str).decode()


def formatter(*, json: bool) -> logging.Formatter:
    """The formatter of LOGGING's console handler."""
    pre_chain: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.ExtraAdder(),
        _drop_extras,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: list[Processor]
    if json:
        renderer = [
            structlog.processors.format_exc_info,
            structlog.processors.EventRenamer("message"),
            structlog.processors.JSONRenderer(serializer=_json),
        ]
    else:
        renderer = [
            _one_line,
            # Plain tracebacks: a rich one would print the frames' locals,
            # secrets included.
            structlog.dev.ConsoleRenderer(
                colors=False, exception_formatter=structlog.dev.plain_traceback
            ),
        ]
    return _Formatter(
        json=json,
        foreign_pre_chain=pre_chain,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer],
    )


ACCESS_LOGGER = "platform_site.access"
# The attributes of every record, which ExtraAdder leaves out.
_RECORD_KEYS = frozenset(
    getattr(structlog.stdlib, "_LOG_RECORD_KEYS", None)
    or logging.LogRecord("", 0, "", 0, "", (), None).__dict__
)
_LEVEL_WIDTH = 9  # ConsoleRenderer's: the longest level name, "exception"
_EVENT_WIDTH = 30  # ConsoleRenderer's pad_event


class _Formatter(structlog.stdlib.ProcessorFormatter):
    """structlog's formatter, but the access line (one per request) is
    rendered directly: the same text or JSON its processors make of it
    (tests/test_structured_logs.py compares the two), at a fraction of
    their cost, which under load was a tenth of a request's."""

    def __init__(self, *, json: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._json = json

    def format(self, record: logging.LogRecord) -> str:
        if record.name != ACCESS_LOGGER or record.exc_info or record.stack_info:
            return super().format(record)
        event: dict[str, Any] = {"event": record.getMessage()}
        for key, value in structlog.contextvars.get_contextvars().items():
            event.setdefault(key, value)
        for key, value in record.__dict__.items():
            if key not in _RECORD_KEYS:
                event[key] = value
        for key in _DROPPED_EXTRAS:
            event.pop(key, None)
        event["level"] = record.levelname.lower()
        event["logger"] = record.name
        event["timestamp"] = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        if self._json:
            event["message"] = event.pop("event")
            return _json(event)
        text = {
            key: _escaped(value) if isinstance(value, str) else value
            for key, value in event.items()
        }
        head = (
            f"{text.pop('timestamp')} [{text.pop('level'):<{_LEVEL_WIDTH}}] "
            f"{text.pop('event'):<{_EVENT_WIDTH}} [{text.pop('logger')}]"
        )
        pairs = " ".join(
            f"{key}={value if isinstance(value, str) else repr(value)}"
            for key, value in sorted(text.items())
        )
        return f"{head} {pairs}" if pairs else head


def configure(config: dict[str, Any]) -> None:
    """Django's LOGGING_CONFIG: LOGGING applied, and Python's warnings logged
    (py.warnings) through the same formatter rather than printed raw."""
    logging.config.dictConfig(config)
    logging.captureWarnings(True)


class ExpiredWakeups(logging.Filter):
    """Drops Celery's "Discarding revoked task" line of an expired delivery
    wake-up (events/engine/wakeups.py). A wake-up expires when no worker
    took it in time, as happens to every one left in the broker while the
    workers were stopped: a worker starting after a pause would print
    thousands. Each is harmless (the claims tick finds what is due on its
    own); other tasks' lines are kept."""

    WAKE_UP = "events.tasks.wake_deliveries"

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Discarding revoked task"):
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        return not (args and args[0] == self.WAKE_UP)
