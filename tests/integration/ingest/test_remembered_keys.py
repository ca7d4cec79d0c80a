"""A repeat of an event this process saw committed is answered without PostgreSQL.

The database is cut through the fault proxy after the first delivery: the repeat still
gets `200 duplicate` (its row is committed), while a new event gets 503, since nothing
can be recorded. With `remembered_keys = 0` the repeat has to ask the database too.
"""

from __future__ import annotations

import asyncpg
import pytest

from chaos.proxy import FaultProxy
from tests.support.deliveries import deliver
from tests.support.gateway import config, running_server


def from_memory(metrics_text: str) -> float:
    """`gateway_duplicates_from_memory_total`; a counter never incremented has no sample."""
    for line in metrics_text.splitlines():
        name, _, value = line.partition(" ")
        if name == "gateway_duplicates_from_memory_total":
            return float(value)
    return 0.0


@pytest.mark.parametrize(("remembered_keys", "repeat_status"), [(1000, 200), (0, 503)])
async def test_repeat_answered_from_memory_while_the_database_is_cut(
    database_url: str, nats_url: str, remembered_keys: int, repeat_status: int
) -> None:
    proxy = FaultProxy("127.0.0.1", 5432)
    await proxy.start()
    proxied = database_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.listen_port}")
    ingest = {"commit_timeout_s": 1.0, "remembered_keys": remembered_keys}
    try:
        async with running_server(config(proxied, nats_url, ingest=ingest)) as server:
            first = deliver("stripe", "evt_remembered")
            answer = await server.client.post(first.path, content=first.body, headers=first.headers)
            assert (answer.status_code, answer.json()["status"]) == (200, "accepted")

            await proxy.set_enabled(False)
            # The provider's retry is signed afresh, as a real retry is.
            again = deliver("stripe", "evt_remembered")
            repeat = await server.client.post(again.path, content=again.body, headers=again.headers)
            assert repeat.status_code == repeat_status
            if repeat_status == 200:
                assert repeat.json() == {"status": "duplicate", "event_id": "evt_remembered"}

            new = deliver("stripe", "evt_while_cut")
            refused = await server.client.post(new.path, content=new.body, headers=new.headers)
            assert refused.status_code == 503  # never a 2xx without a committed row

            # A forged repeat is still refused: the signature is checked before memory.
            forged = {**again.headers, "Stripe-Signature": "t=1,v1=" + "0" * 64}
            denied = await server.client.post(again.path, content=again.body, headers=forged)
            assert denied.status_code == 401

            metrics = (await server.client.get("/metrics")).text
            assert from_memory(metrics) == (1 if repeat_status == 200 else 0)
    finally:
        await proxy.close()
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch("SELECT event_id FROM processed_webhooks ORDER BY id")
    finally:
        await conn.close()
    assert [r["event_id"] for r in rows] == ["evt_remembered"]
