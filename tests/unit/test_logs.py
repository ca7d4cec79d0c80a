"""The JSON logs: a library's records below `warning` stay out unless `debug`."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import orjson
import pytest

from gateway import logs

NAMES = ("gateway.ingest", "uvicorn.error", "httpx", "stripe", "asyncpg.pool")
#: The loggers that decide the named ones' effective level: they and their parents.
RESET = (*NAMES, "gateway", "uvicorn", "asyncpg", "httpcore")


@pytest.fixture
def restore_root() -> Iterator[None]:
    """The root's handlers, and the named loggers as a fresh process has them: earlier
    tests in the same run (uvicorn's own logging set-up, for one) leave levels set and
    loggers disabled."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    saved = [(lg, lg.level, lg.disabled, lg.propagate) for lg in map(logging.getLogger, RESET)]
    for lg, *_ in saved:
        lg.setLevel(logging.NOTSET)
        lg.disabled, lg.propagate = False, True
    yield
    root.handlers[:], root.level = handlers, level
    for lg, lg_level, disabled, propagate in saved:
        lg.setLevel(lg_level)
        lg.disabled, lg.propagate = disabled, propagate


def emitted(level: str, capsys: pytest.CaptureFixture[str]) -> list[tuple[str, str]]:
    logs.configure(level)
    for name in NAMES:
        logger = logging.getLogger(name)
        logger.debug("d")
        logger.info("i")
        logger.warning("w")
    out = [orjson.loads(line) for line in capsys.readouterr().err.splitlines()]
    return [(doc["logger"], doc["msg"]) for doc in out]


def test_library_records_below_warning_are_left_out_at_info(
    restore_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert emitted("INFO", capsys) == [
        ("gateway.ingest", "i"),
        ("gateway.ingest", "w"),
        ("uvicorn.error", "i"),
        ("uvicorn.error", "w"),
        ("httpx", "w"),
        ("stripe", "w"),
        ("asyncpg.pool", "w"),
    ]


def test_debug_shows_everything_but_the_http_clients_urls(
    restore_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """httpx names each request's whole URL below `warning`, and a URL may carry a
    credential (a forwarding target's query, an alert webhook's path): never shown."""
    shown = emitted("DEBUG", capsys)
    assert ("stripe", "i") in shown and ("gateway.ingest", "d") in shown
    assert [m for n, m in shown if n == "httpx"] == ["w"]
    assert len(shown) == 13
