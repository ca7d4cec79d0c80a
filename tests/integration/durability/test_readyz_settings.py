"""`/readyz` says the durability's state and a fixed reason code, never the text of the
database's replication settings: `synchronous_standby_names` names the standbys (their
host names, as deployments write them), and `/readyz` is served on the public port
unless an admin port is set. The log line describes the rule by its shape.

A primary of its own whose `synchronous_standby_names` requires two of three standbys,
none of them connected: `waiting_for_standby`, which before quoted the whole setting."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from gateway.adapters.postgres import migrate
from tests.support.cli import GATEWAY
from tests.support.config_file import write_toml
from tests.support.gateway import config
from tests.support.pg_pair import PgCluster
from tests.support.processes import clean_env
from tests.support.services import free_port, wait_until

pytestmark = pytest.mark.slow

HOSTS = ("pg-standby-a.dc1.internal", "pg-standby-b.dc2.internal", "pg-standby-c.dc3.internal")
NAMES = "FIRST 2 (" + ", ".join(f'"{h}"' for h in HOSTS) + ")"


@pytest.fixture
async def named_primary() -> AsyncIterator[str]:
    """A migrated database on a primary that waits for two of three named standbys."""
    cluster = PgCluster()
    try:
        await asyncio.to_thread(cluster.init)
        await asyncio.to_thread(cluster.start)
        dsn = await cluster.create_database("gw")
        await migrate(dsn)  # before the names: with them, a commit waits for a standby
        conn = await asyncpg.connect(cluster.dsn(), timeout=5)
        try:
            await conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{NAMES}'")
            await conn.execute("SELECT pg_reload_conf()")
        finally:
            await conn.close()
        yield dsn
    finally:
        await asyncio.to_thread(cluster.cleanup)


async def test_readyz_shows_the_state_and_a_code_never_the_standby_names(
    named_primary: str, nats_url: str, tmp_path: Path
) -> None:
    port = free_port()
    cfg = write_toml(
        tmp_path / "gateway.toml", config(named_primary, nats_url, http={"port": port})
    )
    env = clean_env()
    log_path = tmp_path / "serve.log"

    async def waiting() -> httpx.Response | None:
        try:
            async with httpx.AsyncClient(timeout=5) as client:
                answer = await client.get(f"http://127.0.0.1:{port}/readyz")
        except httpx.TransportError:
            return None
        ok = answer.status_code == 200 and answer.json()["durability"]["state"] != "unknown"
        return answer if ok else None

    with log_path.open("w") as log_file:
        proc = subprocess.Popen(
            [GATEWAY, "serve", "--config", str(cfg)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log_file,
        )
    try:
        answer = await wait_until(waiting, timeout_s=60, interval_s=0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert answer is not None
    assert answer.json()["durability"] == {
        "state": "waiting_for_standby",
        "synchronous_standbys": 0,
        "reason": "too_few_streaming",
    }
    assert "synchronous_standby_names" not in answer.text
    assert not any(h in answer.text for h in HOSTS), answer.text
    # The log says why, with the rule's shape and no standby's name.
    records = [json.loads(x) for x in log_path.read_text().splitlines() if x.startswith("{")]
    (line,) = [r for r in records if str(r["msg"]).startswith("database durability:")]
    assert (line["state"], line["reason_code"]) == ("waiting_for_standby", "too_few_streaming")
    assert "synchronous_standby_names (FIRST 2 of 3 names) needs 2" in line["reason"]
    assert not any(h in log_path.read_text() for h in HOSTS)
