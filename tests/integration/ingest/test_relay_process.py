"""`[outbox] inline = false`: `gateway serve` only records, a `gateway relay` process
publishes. Real processes, real PostgreSQL, real JetStream."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
from collections import Counter
from pathlib import Path

import asyncpg

from tests.support.cli import GATEWAY
from tests.support.config_file import write_toml
from tests.support.deliveries import deliver
from tests.support.gateway import config, running_server
from tests.support.processes import clean_env
from tests.support.services import stream_messages, wait_until

EVENTS = 40


async def unpublished(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM processed_webhooks WHERE outbox_holds(processed_webhooks)"
            )
        )
    finally:
        await conn.close()


def pending_gauge(metrics_text: str) -> float | None:
    found = re.search(r"^gateway_outbox_pending (\S+)$", metrics_text, re.MULTILINE)
    return float(found.group(1)) if found else None


async def test_serve_records_and_a_relay_process_publishes(
    database_url: str, nats_url: str, tmp_path: Path
) -> None:
    doc = config(database_url, nats_url, outbox={"inline": False})
    async with running_server(doc) as server:
        sent = [deliver("stripe", f"evt_split_{i}", "payment.succeeded") for i in range(EVENTS)]
        answers = await asyncio.gather(
            *(server.client.post(d.path, content=d.body, headers=d.headers) for d in sent)
        )
        assert [a.status_code for a in answers] == [200] * EVENTS
        assert {a.json()["status"] for a in answers} == {"accepted"}

        # serve publishes nothing itself, but still reports the backlog it leaves.
        await asyncio.sleep(1.0)
        assert await unpublished(database_url) == EVENTS
        assert await stream_messages(nats_url) == []

        async def gauge_shows_backlog() -> bool:
            text = (await server.client.get("/metrics")).text
            return pending_gauge(text) == EVENTS

        await wait_until(gauge_shows_backlog, timeout_s=15)

        env = clean_env()
        relay = subprocess.Popen(
            [GATEWAY, "relay", "--config", str(write_toml(tmp_path / "gateway.toml", doc))],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:

            async def all_published() -> bool:
                return await unpublished(database_url) == 0

            await wait_until(all_published, timeout_s=20)
        finally:
            relay.send_signal(signal.SIGTERM)
            output, _ = relay.communicate(timeout=30)
        assert relay.returncode == 0, output.decode(errors="replace")[-2000:]

    messages = await stream_messages(nats_url)
    ids = Counter(headers["Nats-Msg-Id"] for _, headers, _ in messages)
    assert ids == Counter({f"stripe:{d.event_id}": 1 for d in sent})
