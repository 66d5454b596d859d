"""Log records as one line each: JSON with ``PROJEKTOR_LOG_FORMAT=json``, text otherwise.

Every record carries the id of the request it was written in (``request_id``), so an
error's traceback and the request's own line can be found together. This module is
imported by the settings: it must not import Django's models.
"""

import json
import logging
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

# Set by the request middleware for the length of one request (one thread's context).
current_request_id: ContextVar[str | None] = ContextVar("projektor_request_id", default=None)

REQUEST_LOGGER = "projektor.request"
FORMATS = ("text", "json")


class RequestIdFilter(logging.Filter):
    """Adds ``request_id`` to every record: the request being served, or None."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = current_request_id.get()
        return True


def timestamp(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (a traceback is one escaped string)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None),
        }
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``<time> <level> <logger> [<request id>] <message>``, then any traceback."""

    def format(self, record: logging.LogRecord) -> str:
        request_id = getattr(record, "request_id", None)
        tag = f" [{request_id}]" if request_id else ""
        line = f"{timestamp(record)} {record.levelname} {record.name}{tag} {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return line


def logging_config(log_format: str, *, requests: bool = True) -> dict[str, Any]:
    """The LOGGING setting. Every record reaches the console once, through the root
    handler: Django's own "django" console handler (DEBUG only) would print each of
    them a second time, runserver's "Watching for file changes" line among them.
    Naming "django" resets its children, so runserver's own request log
    ("django.server") is declared as Django has it. ``django.request`` logs only
    errors (5xx, with the traceback): each 4xx is already a line of the request log.

    ``requests=False`` (``PROJEKTOR_LOG_REQUESTS=false``, as ``make run`` has it while
    the demo fleet sends a few requests a second) drops the one line per request, ours
    and runserver's; runserver then prints only its 5xx lines, and errors still log."""
    formatter = JsonFormatter if log_format == "json" else TextFormatter
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": RequestIdFilter}},
        "formatters": {
            "projektor": {"()": formatter},
            "django.server": {
                "()": "django.utils.log.ServerFormatter",
                "format": "[{server_time}] {message}",
                "style": "{",
            },
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "projektor",
                "filters": ["request_id"],
            },
            "django.server": {"class": "logging.StreamHandler", "formatter": "django.server"},
        },
        "root": {"handlers": ["console"], "level": "WARNING"},
        "loggers": {
            "django": {"handlers": []},
            "django.request": {"level": "ERROR"},
            "django.server": {
                "handlers": ["django.server"],
                "level": "INFO" if requests else "ERROR",
                "propagate": False,
            },
            REQUEST_LOGGER: {
                "handlers": ["console"],
                "level": "INFO" if requests else "WARNING",
                "propagate": False,
            },
        },
    }
