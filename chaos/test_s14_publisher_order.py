"""Scenario 14: one publisher's order survives the stream's faults.

One internal service posts events to ONE subject of `POST /v1/events`, one after another
(each POST once the one before it was answered 2xx; a 503 or a cut connection is sent
again, as `gateway.client.Publisher` would). Meanwhile the private NATS server is
SIGKILLed and restarted on its store twice, and one of the two `gateway relay`
processes (`gateway serve` only records: `[outbox] inline = false`) is SIGKILLed and
restarted.

Afterwards the stream, read in stream-sequence order, holds every event, and the first
copy of each is in the posted order (a repeat would be at-least-once delivery, and is
counted). What keeps it: the relay publishes the outbox in commit order in atomic
batches, each sent once the one before it is stored, so a batch cut by a kill or an
outage is stored whole or not at all and sent again before anything after it.

The subject is one settlement does not consume, so the events carry no ordering key:
this is the stream's own guarantee, without the settlement gate.

A second test loses single frames of the relay's connection instead (2 % of its
publishes, 2 % of its PubAcks, through chaos/nats_frames): an atomic batch the stream
refuses for a lost message is sent again one message at a time, each after the one
before is answered, so the order holds there too.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import asyncpg
import httpx
import pytest

from chaos.harness import RESULTS_DIR, merge, profiles
from chaos.nats_frames import NatsFaultProxy
from chaos.stream_order import publisher_order, read_in_order

PROFILE = {
    "fast": {"events": 300, "rate": 60.0, "down_s": 1.5},
    "full": {"events": 2000, "rate": 100.0, "down_s": 4.0},
}
TOKEN = "chaos-billing-token"
SUBJECT = "events.billing.invoice.issued"
_PUBLISHED = """
SELECT count(*) FILTER (WHERE outbox_published(pw)) FROM processed_webhooks pw
WHERE provider = 'service:billing' AND event_id LIKE $1 || '%'
"""


class Publisher:
    """Posts events one after another; `done` counts those answered 2xx."""

    def __init__(self, url: str, run: str, events: int, rate_per_s: float) -> None:
        self.url, self.run, self.events, self.rate_per_s = url, run, events, rate_per_s
        self.posted: list[str] = []  # event ids in the order their 2xx came
        self.retries = 0
        self.answers_at: list[float] = []  # when each 2xx came, from the start
        self._progress = asyncio.Condition()

    @property
    def done(self) -> int:
        return len(self.posted)

    async def run_all(self) -> float:
        started = time.monotonic()
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=self.url, timeout=10.0) as http:
            for i in range(self.events):
                event_id = f"{self.run}_{i:05d}"
                body = {"type": "invoice.issued", "data": {"n": i}}
                await self._post(http, event_id, body, {**headers, "Idempotency-Key": event_id})
                async with self._progress:
                    self.posted.append(event_id)
                    self.answers_at.append(time.monotonic() - started)
                    self._progress.notify_all()
                pause = started + (i + 1) / self.rate_per_s - time.monotonic()
                if pause > 0:
                    await asyncio.sleep(pause)
        return time.monotonic() - started

    async def _post(
        self, http: httpx.AsyncClient, event_id: str, body: object, headers: dict[str, str]
    ) -> None:
        deadline = time.monotonic() + 60
        while True:
            try:
                answer = await http.post("/v1/events", json=body, headers=headers)
                if 200 <= answer.status_code < 300:
                    return
                if answer.status_code not in (429, 503):
                    raise AssertionError(f"{event_id}: {answer.status_code} {answer.text}")
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"{event_id} got no 2xx within 60 s")
            self.retries += 1
            await asyncio.sleep(0.2)

    async def reached(self, share: float) -> None:
        async with self._progress:
            await self._progress.wait_for(lambda: self.done >= share * self.events)


async def wait_published(database_url: str, run: str, events: int, timeout_s: float) -> float:
    """Until the outbox says every event is on the stream; how long that took."""
    started = time.monotonic()
    conn = await asyncpg.connect(database_url)
    try:
        while await conn.fetchval(_PUBLISHED, run) < events:
            if time.monotonic() - started > timeout_s:
                break  # the verdict will say what is missing
            await asyncio.sleep(0.2)
    finally:
        await conn.close()
    return time.monotonic() - started


@pytest.mark.parametrize("profile", profiles())
async def test_one_publishers_order_survives_nats_restarts_and_a_relay_kill(
    profile, make_scenario, database_url, nats_node
):
    p = PROFILE[profile]
    name = f"s14_publisher_order-{profile}"
    sc = make_scenario(
        name,
        database_url,
        nats_node.url,
        outbox={"inline": False},
        services={"billing": {"token": TOKEN, "subjects": ["events.billing.>"]}},
    )
    sc.serve()
    relays = [sc.relay("relay-a"), sc.relay("relay-b")]
    await sc.ready("serve")
    publisher = Publisher(sc.url(), f"ord_{uuid.uuid4().hex[:8]}", p["events"], p["rate"])
    running = asyncio.create_task(publisher.run_all())

    outages: list[tuple[float, float]] = []  # (down, up) from the start of the load
    started = time.monotonic()

    async def outage() -> None:
        nats_node.kill()
        down_at = time.monotonic() - started
        await asyncio.sleep(p["down_s"])
        nats_node.start()
        outages.append((down_at, time.monotonic() - started))

    await publisher.reached(0.2)
    await outage()
    await publisher.reached(0.45)
    relays[0].kill()
    await asyncio.sleep(0.5)
    relays[0].start()
    await publisher.reached(0.7)
    await outage()
    load_s = await running

    drain_s = await wait_published(database_url, publisher.run, p["events"], 90.0)
    stored = await read_in_order(nats_node.url, SUBJECT)
    result = publisher_order(name, publisher.posted, stored)
    during = [sum(a < t < b for t in publisher.answers_at) for a, b in outages]
    result.figures |= {
        "post_retries": publisher.retries,
        "posted_during_outages": during,
        "relay_starts": [r.starts for r in relays],
        "load_s": load_s,
        "drain_s": drain_s,
    }
    print(result.table(), flush=True)
    result.write(RESULTS_DIR / f"{name}.json")
    (RESULTS_DIR / f"{name}.txt").write_text(result.table() + "\n", encoding="utf-8")

    assert result.ok, result.table()
    assert result.figures["posted_2xx"] == result.figures["distinct"] == p["events"]
    assert all(n > 0 for n in during), "an outage saw no load"
    assert relays[0].starts == 2 and all(r.alive for r in relays)


async def test_one_publishers_order_survives_single_lost_frames(
    make_scenario, database_url, nats_node
):
    proxy = NatsFaultProxy("127.0.0.1", nats_node.port, name="nats-relay")
    await proxy.start()
    name = "s14_publisher_order-lost-frames"
    sc = make_scenario(
        name,
        database_url,
        nats_node.url,
        outbox={"inline": False, "publish_timeout_s": 1.0},
        services={"billing": {"token": TOKEN, "subjects": ["events.billing.>"]}},
    )
    try:
        sc.serve()
        proxied = merge(sc.doc, nats={"url": f"nats://127.0.0.1:{proxy.listen_port}"})
        sc.relay(config=sc.write_config("relay", proxied))
        await sc.ready("serve")
        proxy.drop_publishes = proxy.drop_pubacks = 0.02
        publisher = Publisher(sc.url(), f"ord_{uuid.uuid4().hex[:8]}", 300, 100.0)
        load_s = await publisher.run_all()
        drain_s = await wait_published(database_url, publisher.run, 300, 90.0)
        stored = await read_in_order(nats_node.url, SUBJECT)
    finally:
        await proxy.close()
    result = publisher_order(name, publisher.posted, stored)
    result.figures |= {**proxy.counts(), "load_s": load_s, "drain_s": drain_s}
    print(result.table(), flush=True)
    assert result.figures["missing"] == 0, result.table()
    assert result.figures["publishes_dropped"] > 0, "no publish was lost"
    assert result.ok, result.table()
