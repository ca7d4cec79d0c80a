"""The JSON logs: a library's records below `warning` stay out unless `debug`."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import orjson
import pytest

from gateway import logs


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:], root.level = handlers, level


def emitted(level: str, capsys: pytest.CaptureFixture[str]) -> list[tuple[str, str]]:
    logs.configure(level)
    for name in ("gateway.ingest", "uvicorn.error", "httpx", "stripe", "asyncpg.pool"):
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


def test_debug_shows_everything(restore_root: None, capsys: pytest.CaptureFixture[str]) -> None:
    shown = emitted("DEBUG", capsys)
    assert ("httpx", "d") in shown and ("stripe", "i") in shown and ("gateway.ingest", "d") in shown
    assert len(shown) == 15
