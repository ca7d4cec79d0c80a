"""The durability check against a real primary with a streaming standby (`PgPair`):
`synchronous` from a synchronous pair, `at_risk` from an asynchronous one,
`waiting_for_standby` once the synchronous standby is gone (the primary still names it),
`unknown` for a role that may not read the standbys; a running watcher logs each change
of state once; and a process that requires a synchronous standby starts on such a pair."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from gateway.adapters.postgres import migrate, open_pool
from gateway.adapters.postgres.durability import read_durability
from gateway.core.health.durability import DurabilityState
from gateway.metrics import Metrics
from gateway.wiring.durability import DurabilityWatcher
from tests.support.cli import GATEWAY
from tests.support.config_file import write_toml
from tests.support.gateway import config
from tests.support.pg_pair import PgPair
from tests.support.processes import clean_env
from tests.support.services import wait_until

pytestmark = pytest.mark.slow

S = DurabilityState


async def started(pair: PgPair) -> PgPair:
    await asyncio.to_thread(pair.start_primary)
    await pair.create_database()
    await asyncio.to_thread(pair.start_standby)
    await pair.wait_streaming()
    return pair


@pytest.fixture
async def sync_pair() -> AsyncIterator[PgPair]:
    pair = PgPair(synchronous=True)
    try:
        yield await started(pair)
    finally:
        await asyncio.to_thread(pair.cleanup)


@pytest.fixture
async def async_pair() -> AsyncIterator[PgPair]:
    pair = PgPair(synchronous=False)
    try:
        yield await started(pair)
    finally:
        await asyncio.to_thread(pair.cleanup)


async def test_a_synchronous_pair_reads_synchronous(sync_pair: PgPair) -> None:
    async with open_pool(sync_pair.primary_dsn, max_size=2) as pool:
        got = await read_durability(pool)
    assert (got.state, got.synchronous_standbys) == (S.SYNCHRONOUS, 1), got
    assert got.reason == (
        "1 synchronous standby streaming for synchronous_standby_names "
        "(FIRST 1 of 1 name), synchronous_commit = on"
    )


async def test_an_asynchronous_pair_reads_at_risk(async_pair: PgPair) -> None:
    """A standby streams, but nothing makes a commit wait for it."""
    async with open_pool(async_pair.primary_dsn, max_size=2) as pool:
        got = await read_durability(pool)
    assert (got.state, got.synchronous_standbys) == (S.AT_RISK, 0), got
    assert "synchronous_standby_names is empty" in got.reason


async def test_the_session_setting_is_what_counts(sync_pair: PgPair) -> None:
    """A role whose sessions turn synchronous_commit off is at risk on a synchronous pair."""
    await _as_superuser(sync_pair, "ALTER DATABASE chaos SET synchronous_commit = local")
    async with open_pool(sync_pair.primary_dsn, max_size=2) as pool:
        got = await read_durability(pool)
    assert got.state is S.AT_RISK
    assert got.reason.startswith("synchronous_commit is local")


async def test_a_role_without_pg_monitor_reads_unknown_until_granted(sync_pair: PgPair) -> None:
    """The standbys' fields are hidden from a plain role: unknown, saying what to grant."""
    await _as_superuser(sync_pair, "CREATE ROLE gateway_app LOGIN")
    dsn = sync_pair.primary_dsn.replace("postgres@", "gateway_app@")
    async with open_pool(dsn, max_size=2) as pool:
        hidden = await read_durability(pool)
        await _as_superuser(sync_pair, "GRANT pg_monitor TO gateway_app")
        granted = await read_durability(pool)
    assert hidden.state is S.UNKNOWN
    assert hidden.reason == (
        "pg_stat_replication hides its fields from the gateway's role gateway_app: grant it "
        "pg_monitor (or pg_read_all_stats) so the gateway can see its standbys"
    )
    assert granted.state is S.SYNCHRONOUS


async def test_the_watcher_logs_the_standby_leaving_and_coming_back(
    sync_pair: PgPair, caplog: pytest.LogCaptureFixture
) -> None:
    """Synchronous at start (info), waiting once the standby stops (one warning, however
    many readings), synchronous again once it streams (info); the gauges follow. Only the
    state is read while the standby is away: a commit would wait for it."""
    caplog.set_level(logging.INFO, logger="gateway.wiring.durability")
    metrics = Metrics()
    async with open_pool(sync_pair.primary_dsn, max_size=2) as pool:
        watcher = DurabilityWatcher(lambda: read_durability(pool), metrics, interval_s=0.1)
        await watcher.check_at_start()
        watcher.start()
        try:
            await asyncio.to_thread(sync_pair.stop_standby)
            await wait_until(lambda: _state_is(watcher, S.WAITING_FOR_STANDBY), timeout_s=30)
            assert watcher.last.synchronous_standbys == 0
            assert "needs 1 synchronous standby, 0 streaming" in watcher.last.reason
            assert metrics.database_durability.get(state="waiting_for_standby") == 1.0
            assert metrics.database_durability.get(state="synchronous") == 0.0
            await asyncio.sleep(0.5)  # several more readings in the same state
            await asyncio.to_thread(sync_pair.standby.start)
            await sync_pair.wait_streaming()
            await wait_until(lambda: _state_is(watcher, S.SYNCHRONOUS), timeout_s=30)
            assert metrics.database_synchronous_standbys.get() == 1.0
        finally:
            await watcher.close()
    said = [(r.levelname, r.getMessage().split(":")[1].strip()) for r in caplog.records]
    assert said == [
        ("INFO", "synchronous"),
        ("WARNING", "waiting_for_standby"),
        ("INFO", "synchronous"),
    ]
    assert caplog.records[1].__dict__["state"] == "waiting_for_standby"


async def test_waiting_for_a_standby_refuses_a_required_start(sync_pair: PgPair) -> None:
    """With the standby gone, a process that requires one does not start."""
    from gateway.errors import DatabaseNotDurable

    await asyncio.to_thread(sync_pair.stop_standby)
    async with open_pool(sync_pair.primary_dsn, max_size=2) as pool:
        watcher = DurabilityWatcher(lambda: read_durability(pool), Metrics(), required=True)
        with pytest.raises(DatabaseNotDurable) as refused:
            await watcher.check_at_start()
    assert refused.value.state == "waiting_for_standby"
    assert str(refused.value).startswith(
        "config error: database.require_synchronous_standby: is true, but the database's "
        "durability is waiting_for_standby: synchronous_standby_names (FIRST 1 of 1 name)"
    )


async def test_a_required_relay_starts_on_a_synchronous_pair(
    sync_pair: PgPair, nats_url: str, tmp_path: Path
) -> None:
    """`require_synchronous_standby = true` met: the relay runs, and says so at info."""
    await migrate(sync_pair.primary_dsn)
    doc = config(sync_pair.primary_dsn, nats_url, database={"require_synchronous_standby": True})
    cfg = write_toml(tmp_path / "gateway.toml", doc)
    env = clean_env()
    log_path = tmp_path / "relay.log"

    def durability_lines() -> list[dict[str, object]]:
        lines = log_path.read_text().rpartition("\n")[0].splitlines()  # whole lines only
        records = [json.loads(line) for line in lines if line.startswith("{")]
        return [r for r in records if "durability" in str(r["msg"])]

    async def checked() -> bool:
        return bool(durability_lines()) or proc.poll() is not None

    with log_path.open("w") as log_file:
        proc = subprocess.Popen(
            [GATEWAY, "relay", "--config", str(cfg)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log_file,
        )
    try:
        # Until the start-up check has said its line (a refusal would exit instead).
        await wait_until(checked, timeout_s=30, interval_s=0.1)
        assert proc.poll() is None, log_path.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    durability = durability_lines()
    assert [(r["level"], r["state"], r["required"]) for r in durability] == [
        ("info", "synchronous", True)
    ]


async def _state_is(watcher: DurabilityWatcher, state: DurabilityState) -> bool:
    return watcher.last.state is state


async def _as_superuser(pair: PgPair, statement: str) -> None:
    conn = await asyncpg.connect(pair.primary.dsn(), timeout=5)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()
