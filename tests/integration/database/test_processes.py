"""Every process on a multi-host database URL whose first host is dead: `gateway serve`
accepts and publishes, `gateway relay` publishes what serve recorded, `gateway settle`
settles, and the CLI reads; serve also gets past a black-holed first host within less
than its connect timeout."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx

from tests.integration.dlq.test_dlq_cli import arun
from tests.integration.metrics.test_processes import answers, process
from tests.support.config_file import write_toml
from tests.support.database_faults import black_hole, dead_address, with_hosts
from tests.support.deliveries import Delivery, deliver
from tests.support.gateway import BILLING_TOKEN, config, running_server
from tests.support.services import free_port, stream_messages, wait_until
from tests.support.settlement import fetch, settlement_sections
from tests.support.stub import Stub


async def published_ids(nats_url: str) -> set[str]:
    return {headers["Nats-Msg-Id"] for _, headers, _ in await stream_messages(nats_url)}


async def recorded(database_url: str, event_id: str) -> bool:
    rows = await fetch(
        database_url, "SELECT 1 FROM processed_webhooks WHERE event_id = $1", event_id
    )
    return len(rows) == 1


async def serve_accepts(database_url: str, url: str, nats_url: str, tmp_path: Path) -> float:
    """Start `gateway serve` on `url`; POST one event once ready; return the seconds from
    the start to its 200, after checking the row and the stream."""
    port = free_port()
    cfg = write_toml(tmp_path / "gateway.toml", config(url, nats_url, http={"port": port}))
    d = deliver("stripe", f"evt_hosts_{port}", "payment_intent.succeeded")
    started = time.monotonic()
    with process("serve", "--config", str(cfg)) as serve:
        await wait_until(lambda: answers(port, "/readyz"), timeout_s=60, interval_s=0.2)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            answer = await client.post(d.path, content=d.body, headers=d.headers)
        took_s = time.monotonic() - started
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"status": "accepted", "event_id": d.event_id}
        assert await recorded(database_url, d.event_id)

        async def on_stream() -> bool:
            return f"stripe:{d.event_id}" in await published_ids(nats_url)

        await wait_until(on_stream, timeout_s=20)
        assert serve.poll() is None
    return took_s


async def test_serve_accepts_and_publishes_past_a_dead_first_host(
    database_url: str, nats_url: str, tmp_path: Path
) -> None:
    await serve_accepts(database_url, with_hosts(database_url, dead_address()), nats_url, tmp_path)


#: The pool's connect timeout: what a black-holed first host costs without the stagger
#: (at least once: the pool's first connection waits it out before anything else).
CONNECT_TIMEOUT_S = 5.0


async def test_serve_gets_past_a_black_holed_first_host(
    database_url: str, nats_url: str, tmp_path: Path
) -> None:
    """A first host that accepts TCP and never answers costs the stagger delay, not its
    5 s connect timeout: serve becomes ready and takes the event well within that
    timeout of a run on the healthy host alone (asyncpg's own walk never would). The
    baseline run takes out what both pay: the interpreter's start, NATS, the stream."""
    baseline_s = await serve_accepts(database_url, database_url, nats_url, tmp_path)
    async with black_hole() as hole:
        url = with_hosts(database_url, hole.listen)
        took_s = await serve_accepts(database_url, url, nats_url, tmp_path)
        assert hole.connections >= 1, "the black-holed host was tried first"
    extra_s = took_s - baseline_s
    print(
        f"serve, black-holed first host: first 200 after {took_s:.1f} s, "
        f"{extra_s:.1f} s more than on the healthy host alone"
    )
    assert extra_s < 3.0 < CONNECT_TIMEOUT_S


async def test_a_relay_process_publishes_past_a_dead_first_host(
    database_url: str, nats_url: str, tmp_path: Path
) -> None:
    """`[outbox] inline = false`: serve only records; the relay process publishes."""
    url = with_hosts(database_url, dead_address())
    doc = config(url, nats_url, outbox={"inline": False})
    sent = [deliver("stripe", f"evt_hosts_relay_{i}", "payment.succeeded") for i in range(10)]
    async with running_server(doc) as server:
        answers_ = await asyncio.gather(
            *(server.client.post(d.path, content=d.body, headers=d.headers) for d in sent)
        )
        assert [a.status_code for a in answers_] == [200] * len(sent)
    assert await published_ids(nats_url) == set()
    with process("relay", "--config", str(write_toml(tmp_path / "gateway.toml", doc))) as relay:
        expected = {f"stripe:{d.event_id}" for d in sent}

        async def all_published() -> bool:
            return await published_ids(nats_url) == expected

        await wait_until(all_published, timeout_s=30, interval_s=0.2)
        assert relay.poll() is None


async def test_settle_settles_past_a_dead_first_host(
    database_url: str, nats_url: str, tmp_path: Path, stub: Stub, redis_url: str
) -> None:
    url = with_hosts(database_url, dead_address())
    doc = config(url, nats_url, **settlement_sections(stub.url, redis_url))
    cfg = str(write_toml(tmp_path / "gateway.toml", doc))
    opened = await arun("ledger", "--config", cfg, "open-account", "m_hosts")
    assert opened.returncode == 0, opened.stderr
    total = 5
    async with running_server(doc) as server:
        for i in range(total):
            event = {
                "type": "payment.captured",
                "data": {
                    "settlement_id": f"s_hosts_{i}",
                    "merchant_id": "m_hosts",
                    "amount_minor": 100,
                    "currency": "USD",
                },
            }
            headers = {"Authorization": f"Bearer {BILLING_TOKEN}", "Idempotency-Key": f"h_{i}"}
            answer = await server.client.post("/v1/events", json=event, headers=headers)
            assert answer.status_code == 200, answer.text
        with process("settle", "--config", cfg) as worker:

            async def all_settled() -> bool:
                rows = await fetch(
                    database_url, "SELECT count(*) AS n FROM settlements WHERE state = 'settled'"
                )
                return int(rows[0]["n"]) == total

            await wait_until(all_settled, timeout_s=60, interval_s=0.2)
            assert worker.poll() is None


async def test_the_cli_reads_past_a_dead_first_host_and_says_which_host(
    database_url: str, nats_url: str, tmp_path: Path
) -> None:
    """`gateway events list` lists the event; its log names the host it settled on and
    the one it skipped, never the password."""
    dead = dead_address()
    url = with_hosts(database_url, dead).replace("postgres@", "postgres:s3cr3t@", 1)
    doc = config(url, nats_url)
    cfg = str(write_toml(tmp_path / "gateway.toml", doc))
    d: Delivery = deliver("stripe", "evt_hosts_cli", "invoice.paid")
    async with running_server(doc) as server:
        answer = await server.client.post(d.path, content=d.body, headers=d.headers)
        assert answer.status_code == 200
    listed = await arun("events", "list", "--json", "--config", cfg)
    assert listed.returncode == 0, listed.stderr
    assert [e["event_id"] for e in json.loads(listed.stdout)] == ["evt_hosts_cli"]
    logs = [json.loads(line) for line in listed.stderr.splitlines() if line.startswith("{")]
    skipped = [r for r in logs if r["msg"] == "database host unusable"]
    chosen = [r for r in logs if r["msg"] == "database host chosen"]
    assert [(r["host"], r["outcome"]) for r in skipped] == [(dead, "refused")]
    assert [r["host"] for r in chosen] == ["127.0.0.1:5432"]
    assert "s3cr3t" not in listed.stderr
