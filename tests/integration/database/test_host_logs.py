"""What a pool says about its hosts: while no host is usable (the primary lost, the
standby not yet promoted), each new connection walks the list again, and a host that
stays unusable is warned about once, not on every walk."""

from __future__ import annotations

import logging

import pytest

from gateway.adapters.postgres import open_pool
from gateway.errors import DatabaseUnavailable
from tests.support.database_faults import dead_address, with_hosts

LOGGER = "gateway.adapters.postgres.hosts"


def _lines(caplog: pytest.LogCaptureFixture, msg: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.getMessage() == msg]


async def test_hosts_that_stay_unusable_are_warned_about_once(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    first, second = dead_address(), dead_address()
    url = with_hosts(database_url, first, second).replace(f",{_own(database_url)}", "")
    async with open_pool(url, max_size=2) as pool:
        for _ in range(3):
            with pytest.raises(DatabaseUnavailable):
                await pool.acquire()
    unusable = _lines(caplog, "database host unusable")
    assert [(r.host, r.levelno) for r in unusable] == [  # type: ignore[attr-defined]
        (first, logging.WARNING),
        (second, logging.WARNING),
        *[(host, logging.DEBUG) for host in (first, second)] * 2,
    ]


async def test_a_first_connection_past_a_dead_host_is_no_failover(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Said at info (each command's first connection would otherwise warn), with the
    dead host's own warning beside it."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    dead = dead_address()
    async with open_pool(with_hosts(database_url, dead), max_size=2) as pool:
        conn = await pool.acquire()
        await pool.release(conn)
    chosen = _lines(caplog, "database host chosen")
    assert [r.levelno for r in chosen] == [logging.INFO]
    assert [r.levelno for r in _lines(caplog, "database host unusable")] == [logging.WARNING]


def _own(dsn: str) -> str:
    """The `host:port` of a single-host `postgresql://user@host:port/db` URL."""
    return dsn.partition("@")[2].partition("/")[0]
