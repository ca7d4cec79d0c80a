"""Scenario 16: a relay whose PubAcks are lost parks nothing that reached the stream.

The stream has no `allow_atomic`, so the relay publishes one message at a time,
pipelined, and a fault proxy in front of NATS loses a fifth of its PubAcks. The cursor
stops at the first row without an answer and the next sweep sends the whole tail again,
so each row is sent many times and many of its answers are lost. Only the row holding
the cursor counts a publish attempt each sweep; counting every unanswered row parked
genuine rows the stream had stored long before as `PUBLISH_ATTEMPTS_EXHAUSTED` (128 of
300 with `max_publish_attempts = 5`).

The audit: every posted event is on the stream once, is marked published, and none is
parked.
"""

from __future__ import annotations

import uuid

import asyncpg

from chaos.harness import merge
from chaos.nats_frames import NatsFaultProxy
from chaos.stream_order import read_in_order
from chaos.test_s14_publisher_order import SUBJECT, TOKEN, Publisher, wait_published
from chaos.test_s15_ordered_settlement import create_stream_without_atomic

EVENTS = 300
_PARKED = """
SELECT count(*) FROM processed_webhooks
WHERE provider = 'service:billing' AND event_id LIKE $1 || '%' AND publish_parked_at IS NOT NULL
"""


async def test_lost_pubacks_park_no_row_the_stream_stored(make_scenario, database_url, nats_node):
    proxy = NatsFaultProxy("127.0.0.1", nats_node.port, name="nats-relay")
    await proxy.start()
    name = "s16_relay_lost_pubacks"
    sc = make_scenario(
        name,
        database_url,
        nats_node.url,
        outbox={"inline": False, "publish_timeout_s": 0.3, "max_publish_attempts": 5},
        services={"billing": {"token": TOKEN, "subjects": ["events.billing.>"]}},
    )
    try:
        await create_stream_without_atomic(sc.write_config("stream", sc.doc))
        sc.serve()
        await sc.ready("serve")
        publisher = Publisher(sc.url(), f"lost_{uuid.uuid4().hex[:8]}", EVENTS, 300.0)
        await publisher.run_all()  # recorded before the relay starts: one long tail
        proxy.drop_pubacks = 0.2
        proxied = merge(sc.doc, nats={"url": f"nats://127.0.0.1:{proxy.listen_port}"})
        sc.relay(config=sc.write_config("relay", proxied))
        drain_s = await wait_published(database_url, publisher.run, EVENTS, 120.0)
        conn = await asyncpg.connect(database_url)
        try:
            parked = await conn.fetchval(_PARKED, publisher.run)
        finally:
            await conn.close()
        stored = await read_in_order(nats_node.url, SUBJECT)
    finally:
        await proxy.close()
    counts = proxy.counts()
    print(f"{name}: parked {parked}, drain {drain_s:.1f} s, {counts}", flush=True)
    assert counts["pubacks_dropped"] > 0, "no PubAck was lost"
    assert parked == 0, f"{parked} rows parked though the stream had them"
    ids = [m.event_id for m in stored]
    assert sorted(set(ids)) == sorted(publisher.posted)
