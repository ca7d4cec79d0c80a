"""Structured JSON logs: one object per line, fields passed with `extra={...}`.

Nothing here ever receives a secret or a request body: callers log ids, classes and
counts. Exception stacks are included because they are what an operator needs.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

from gateway import tracing

# Attributes every LogRecord has; anything else came from `extra` and is a field.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_") and key != "color_message":
                doc[key] = value
        ids = tracing.current_ids()  # logs and traces link both ways (None while off)
        if ids is not None:
            doc["trace_id"], doc["span_id"] = ids
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(doc, default=str).decode()


#: Loggers whose records are the gateway's own: ours, and uvicorn's, the server that
#: `gateway serve` is (its start and stop lines are the process's own).
OWN_LOGGERS = ("gateway", "uvicorn")


class LibraryFilter(logging.Filter):
    """Lets a third-party library's records through only from `warning` up.

    At `info` an HTTP client logs every request it makes, and a provider SDK its own
    account of an error the command already reports in one line; only `--log-level
    debug` shows them. Filtering at the handler (rather than setting each library's
    level) covers libraries nobody listed.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return True
        return record.name.partition(".")[0] in OWN_LOGGERS


def configure(level: str = "INFO") -> None:
    """Send every logger (ours, uvicorn's, the libraries') through the JSON formatter;
    libraries below `warning` only at `debug`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    if level.upper() != "DEBUG":
        handler.addFilter(LibraryFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # httpx names every request's whole URL at `info`, query included, and URLs may
    # carry credentials (a forwarding target's, an alert webhook's): never, at any level.
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
