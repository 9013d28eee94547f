"""Logging for prewarm's entry points: readable lines on a terminal, JSON lines otherwise.

Library modules only call ``logging.getLogger(__name__)``; a command calls
:func:`configure_logging` once. Fields passed with ``extra={...}`` (``workload``,
``model_version``...) become top-level keys of the JSON record.

Third-party libraries (MLflow, its database layer, and whatever calls ``warnings.warn``)
show their warnings only at ``DEBUG``: they advise on the library's own use, not on what
prewarm did, and every run would print the same ones. Their errors always show.
"""

from __future__ import annotations

import logging
import os
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from training.documents import dumps
from training.redaction import redact

if TYPE_CHECKING:
    from rich.console import Console

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
"""The levels a command's logs may be set to (``--log-level``, ``PREWARM_LOG_LEVEL``)."""

PACKAGES = ("prewarm", "training", "forecaster", "serving")
# "py.warnings" is where ``logging.captureWarnings`` sends ``warnings.warn``.
LIBRARIES = ("mlflow", "alembic", "urllib3", "py.warnings")
MLFLOW_CONFIGURE_LOGGING = "MLFLOW_CONFIGURE_LOGGING"
# The loggers MLflow's import gives a handler of its own (unless told not to).
MLFLOW_LOGGERS = ("mlflow", "alembic", "sqlalchemy.engine", "huey")

# Not a record's own fields: uvicorn's "color_message" is its message again, in ANSI colours.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "color_message",
}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message and the extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                document[key] = value
        if record.exc_text:  # already formatted (and redacted: see Redaction)
            document["exception"] = record.exc_text
        elif record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return dumps(document, default=str)


class Redaction(logging.Filter):
    """Takes credentials out of a record before any handler writes it (see
    :func:`training.redaction.redact`): its message, its traceback and its extra fields.

    A library's error quotes what it was given: MLflow's the store's URI with its password,
    an HTTP client's the request's URL; prewarm's own messages are redacted where they are
    made, this is the last line before the log.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        for key, value in list(record.__dict__.items()):
            if key not in _STANDARD and isinstance(value, str):
                setattr(record, key, redact(value))
        return True


def configure_logging(level: str = "INFO", console: Console | None = None) -> None:
    """Send prewarm's logs, and libraries' warnings at ``DEBUG``, to one handler.

    Parameters
    ----------
    level
        Level name of prewarm's own loggers (``DEBUG``, ``INFO``, ``WARNING``, ``ERROR``).
    console
        A rich console on a terminal: records print through it as readable lines, so that
        a live progress bar drawn on the same console stays below them (rich prints above
        its live display). ``None``: JSON lines on stderr, for log collectors (the CronJob).
    """
    without_mlflow_handlers()
    debug = logging.getLevelNamesMapping()[level.upper()] <= logging.DEBUG
    handler = redacting(_json_handler() if console is None else _console_handler(console))
    for name in PACKAGES:
        _route(name, handler, level.upper())
    for name in LIBRARIES:
        _route(name, handler, "WARNING" if debug else "ERROR")
    logging.captureWarnings(True)


def without_mlflow_handlers() -> None:
    """Keep MLflow, when imported later, from giving its loggers a handler of its own.

    Such a handler would bypass the routing of a command's logs (MLflow's lines in its own
    format); told not to, MLflow need not be imported (two seconds) before routing, by a
    command that may never use it. The setting is read when MLflow is imported.
    """
    if "mlflow" not in sys.modules:
        os.environ[MLFLOW_CONFIGURE_LOGGING] = "false"


def log_console() -> Console | None:
    """The console prewarm's logs print through, when they go to a terminal."""
    from rich.logging import RichHandler

    for handler in logging.getLogger(PACKAGES[0]).handlers:
        if isinstance(handler, RichHandler):
            return handler.console
    return None


def redacting(handler: logging.Handler) -> logging.Handler:
    """``handler`` with :class:`Redaction` among its filters."""
    handler.addFilter(Redaction())
    return handler


def _route(name: str, handler: logging.Handler, level: str) -> None:
    logger = logging.getLogger(name)
    logger.handlers = [handler]
    logger.setLevel(level)
    logger.propagate = False


def _json_handler() -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    return handler


def _console_handler(console: Console) -> logging.Handler:
    from rich.logging import RichHandler

    # What happened, not which line of which file logged it.
    return RichHandler(console=console, show_path=False)
