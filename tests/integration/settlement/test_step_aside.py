"""A settlement worker whose database goes silent steps aside (issue 42, finding 5).

Two workers share the `settlement` consumer; one reaches PostgreSQL through the fault
proxy, which is black-holed under it. That worker must stop fetching, hand the messages
it holds back at once (`nak` without delay), and leave every payment to the healthy
worker, all of them settled while its own database is still silent; once the database
answers again, it fetches again. `ack_wait_s` and the retry delays are a minute here, so
no message reaches the healthy worker by the stream's own redelivery or a retry in time:
only a hand-back does.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import orjson

from chaos.proxy import FaultProxy
from gateway import settings as settings_mod
from gateway.settlement.worker import SettlementWorker
from gateway.wiring.settlement import settlement_parts
from tests.support.deliveries import deliver
from tests.support.gateway import config, running_server
from tests.support.services import wait_until
from tests.support.settlement import fetch, merchant_balance, open_merchant, settlement_sections
from tests.support.stepping_aside import Seen, recording, through
from tests.support.stub import Stub

PAYMENTS = 20
AMOUNT_MINOR = 250
#: Long enough that nothing comes back by redelivery or retry while the test waits.
SLOW_S = 60.0


@contextlib.asynccontextmanager
async def worker(doc: dict[str, Any]) -> AsyncIterator[tuple[SettlementWorker, Seen]]:
    async with settlement_parts(settings_mod.parse(doc, env={})) as parts:
        seen = recording(parts.consumer)
        w = SettlementWorker(parts)
        started = asyncio.Event()
        stop = asyncio.Event()
        task = asyncio.create_task(w.run(stop, started.set))
        await asyncio.wait_for(started.wait(), 30)
        try:
            yield w, seen
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)


def payment(n: int) -> tuple[str, bytes]:
    event_id = f"evt_aside_{n}"
    body = {
        "id": event_id,
        "type": "payment_intent.succeeded",
        "data": {
            "object": {
                "id": f"pi_aside_{n}",
                "amount_received": AMOUNT_MINOR,
                "currency": "usd",
                "metadata": {"merchant_id": "m_aside"},
            }
        },
    }
    return event_id, orjson.dumps(body)


async def settled_count(dsn: str) -> int:
    rows = await fetch(dsn, "SELECT count(*) AS n FROM settlements WHERE state = 'settled'")
    return int(rows[0]["n"])


async def test_a_worker_on_a_silent_database_hands_its_messages_to_the_healthy_one(
    database_url: str, nats_url: str, stub: Stub, redis_url: str
) -> None:
    sections = settlement_sections(
        stub.url,
        redis_url,
        settlement={"ack_wait_s": SLOW_S, "retry_delays_s": [SLOW_S] * 3},
        ledger={"retry_delays_s": [SLOW_S] * 3},
    )
    healthy_doc = config(database_url, nats_url, **sections)
    host = urlsplit(database_url)
    proxy = FaultProxy(host.hostname or "127.0.0.1", host.port or 5432)
    await proxy.start()
    counter = itertools.count()
    try:
        sick_doc = config(through(database_url, proxy), nats_url, **sections)
        async with running_server(healthy_doc) as server, worker(sick_doc) as (sick, seen):
            await open_merchant(sick.parts, "m_aside")
            # 1. The sick worker alone, its database silent from now on: it takes the
            # payments and cannot settle them.
            await proxy.set_blackhole(True)
            for _ in range(PAYMENTS):
                event_id, body = payment(next(counter))
                d = deliver("stripe", event_id, body=body)
                answer = await server.client.post(d.path, content=d.body, headers=d.headers)
                assert answer.status_code == 200, answer.text

            async def sick_took_some() -> bool:
                return seen.fetched > 0

            await wait_until(sick_took_some, timeout_s=30)
            # 2. The healthy worker joins; every payment settles while the sick worker's
            # database is still black-holed.
            async with worker(healthy_doc) as (healthy, healthy_seen):

                async def all_settled() -> bool:
                    return await settled_count(database_url) == PAYMENTS

                await wait_until(all_settled, timeout_s=45, interval_s=0.1)
                assert proxy.blackhole
                log = list(seen.log)
                assert await merchant_balance(healthy.parts, "m_aside") == PAYMENTS * AMOUNT_MINOR
                # What the sick worker took it handed back at once, and settled nothing.
                answers = [entry for entry in log if entry[0] != "fetch"]
                assert answers, "the sick worker never handed its messages back"
                assert set(answers) == {("nak", 0.0)}, answers
                assert len(answers) >= seen.fetched
                # It stopped fetching once it had handed them back.
                first_back = log.index(("nak", 0.0))
                assert ("fetch",) not in log[first_back:], log
                assert not sick.database.serving.is_set()
                # 3. Its database answers again: it fetches again, and both settle.
                await proxy.set_blackhole(False)
                await wait_until(
                    lambda: asyncio.sleep(0, sick.database.serving.is_set()), timeout_s=30
                )
                fetches = len(seen.log)

                async def sick_fetching() -> bool:
                    return ("fetch",) in seen.log[fetches:]

                await wait_until(sick_fetching, timeout_s=10)
                for _ in range(4):
                    event_id, body = payment(next(counter))
                    d = deliver("stripe", event_id, body=body)
                    answer = await server.client.post(d.path, content=d.body, headers=d.headers)
                    assert answer.status_code == 200, answer.text

                async def all_of_them() -> bool:
                    return await settled_count(database_url) == PAYMENTS + 4

                await wait_until(all_of_them, timeout_s=45, interval_s=0.1)
                assert healthy_seen.fetched >= PAYMENTS
    finally:
        await proxy.close()
