"""Per-key numbers at ingest, against real PostgreSQL and JetStream: 1, 2, 3, ... per key
with no gap, none for a repeat, none off the ordered subjects or with ordering off, the
walk order equal to the number order under concurrent writers, and the two headers on
the stream."""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import orjson
import pytest

from gateway import settings as settings_mod
from gateway.adapters.postgres import open_pool
from gateway.adapters.postgres.ordering.key_numbers import insert_numbered_whole
from gateway.adapters.postgres.webhooks import _keyed_rows, _rows_json, insert_events, record_events
from gateway.backfill.run import backfill
from gateway.core.backfill.decisions import Window
from gateway.core.events.model import Event, new_event
from gateway.ingest.inbox import GroupCommitInbox
from gateway.wiring.backfill import backfill_parts
from tests.support.cli import invoke
from tests.support.config_file import write_toml
from tests.support.deliveries import deliver
from tests.support.gateway import BILLING_TOKEN, config, running_server
from tests.support.provider_apis import API_KEY, running_apis, stand_in_keys, stripe_event
from tests.support.services import stream_messages, wait_until

AT = datetime(2026, 1, 1, tzinfo=UTC)


def event(
    event_id: str,
    key: str | None,
    provider: str = "stripe",
    digest: bytes | None = None,
    body: bytes | None = None,
) -> Event:
    subject = "webhooks.stripe.payment_intent.succeeded"
    body = body or orjson.dumps({"id": event_id, "key": key})
    return new_event(provider, event_id, "payment_intent.succeeded", subject, {}, body, AT,
                     body_sha256=digest, order_key=key)  # fmt: skip


async def rows(dsn: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(
            "SELECT provider, event_id, order_key, key_seq, outbox_xid::text::numeric AS xid, id "
            "FROM processed_webhooks ORDER BY outbox_xid, id"
        )
    finally:
        await conn.close()


async def counters(dsn: str) -> dict[tuple[str, str], int]:
    conn = await asyncpg.connect(dsn)
    try:
        found = await conn.fetch("SELECT provider, order_key, last_seq FROM order_counters")
    finally:
        await conn.close()
    return {(r["provider"], r["order_key"]): r["last_seq"] for r in found}


def numbers_by_key(found: Sequence[asyncpg.Record]) -> dict[tuple[str, str], list[int]]:
    """Each key's numbers in walk order, (outbox_xid, id)."""
    by_key: dict[tuple[str, str], list[int]] = defaultdict(list)
    for r in found:
        if r["order_key"] is not None:
            by_key[(r["provider"], r["order_key"])].append(r["key_seq"])
    return by_key


async def test_each_key_is_numbered_from_1_without_gaps_across_groups(database_url: str) -> None:
    async with open_pool(database_url) as pool, pool.acquire() as conn:
        first = await record_events(conn, [event("e1", "pi_a"), event("e2", "pi_b"),
                                           event("e3", None), event("e4", "pi_a")])  # fmt: skip
        second = await record_events(conn, [event("e5", "pi_a"), event("e6", "pi_b")])
    assert {k[1]: v.key_seq for k, v in first.items()} == {"e1": 1, "e2": 1, "e3": None, "e4": 2}
    assert {k[1]: v.key_seq for k, v in second.items()} == {"e5": 3, "e6": 2}
    found = await rows(database_url)
    assert numbers_by_key(found) == {("stripe", "pi_a"): [1, 2, 3], ("stripe", "pi_b"): [1, 2]}
    assert await counters(database_url) == {("stripe", "pi_a"): 3, ("stripe", "pi_b"): 2}
    # The same key text of another provider is another key.
    async with open_pool(database_url) as pool, pool.acquire() as conn:
        other = await record_events(conn, [event("e1", "pi_a", provider="paddle")])
    assert [v.key_seq for v in other.values()] == [1]


async def test_a_repeat_gets_no_number_and_leaves_no_gap(database_url: str) -> None:
    async with open_pool(database_url) as pool, pool.acquire() as conn:
        await record_events(conn, [event("e1", "k"), event("e2", "k")])
        again = await record_events(conn, [event("e2", "k"), event("e1", "k")])
        after = await record_events(conn, [event("e2", "k"), event("e3", "k")])
    assert again == {}
    assert {k[1]: v.key_seq for k, v in after.items()} == {"e3": 3}
    assert numbers_by_key(await rows(database_url)) == {("stripe", "k"): [1, 2, 3]}


async def test_repeats_after_new_rows_of_their_key_give_their_numbers_back(
    database_url: str,
) -> None:
    """The group moves each key's counter by all its rows before ON CONFLICT says which
    are repeats: those after the key's new rows hand their numbers back, and a counter
    made for repeats only (an event recorded unkeyed, sent again keyed) is not kept."""
    async with open_pool(database_url) as pool, pool.acquire() as conn:
        await record_events(conn, [event("e1", "k"), event("u1", None)])
        mixed = await record_events(conn, [event("e2", "k"), event("e1", "k"), event("u1", "j")])
        assert await counters(database_url) == {("stripe", "k"): 2}
        after = await record_events(conn, [event("e3", "k"), event("j1", "j")])
    assert {k[1]: v.key_seq for k, v in mixed.items()} == {"e2": 2}
    assert {k[1]: v.key_seq for k, v in after.items()} == {"e3": 3, "j1": 1}
    assert numbers_by_key(await rows(database_url)) == {
        ("stripe", "k"): [1, 2, 3],
        ("stripe", "j"): [1],
    }
    assert await counters(database_url) == {("stripe", "k"): 3, ("stripe", "j"): 1}


async def test_a_body_digest_repeat_under_another_id_gets_no_number(database_url: str) -> None:
    digest = hashlib.sha256(b"same body").digest()
    async with open_pool(database_url) as pool, pool.acquire() as conn:
        await record_events(conn, [event("d1", "k", digest=digest)])
        forged = await record_events(conn, [event("forged", "k", digest=digest),
                                            event("d2", "k")])  # fmt: skip
    assert {k[1]: v.key_seq for k, v in forged.items()} == {"d2": 2}
    assert await counters(database_url) == {("stripe", "k"): 2}


async def test_a_planned_number_whose_row_a_concurrent_writer_took_is_given_again(
    database_url: str,
) -> None:
    """A concurrent writer records `x` (unkeyed here) while this group numbers `x` and `y`
    under key k: `x` is skipped at insert, so the group is rolled back and numbered again,
    and `y` is 1, not 2 behind a number nobody has."""
    async with open_pool(database_url) as pool, pool.acquire() as conn:
        async with pool.acquire() as other, other.transaction():
            await insert_events(other, [event("x", None)])  # uncommitted
            task = asyncio.create_task(record_events(conn, [event("x", "k"), event("y", "k")]))

            async def waiting() -> bool:  # on the other writer's row of `x`
                return bool(await other.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database()"))  # fmt: skip

            await wait_until(waiting, timeout_s=10)
            # leaving the block commits `x`
        recorded = await task
    assert {k[1]: v.key_seq for k, v in recorded.items()} == {"y": 1}
    assert numbers_by_key(await rows(database_url)) == {("stripe", "k"): [1]}
    assert await counters(database_url) == {("stripe", "k"): 1}


async def test_concurrent_group_commits_number_each_key_in_walk_order(database_url: str) -> None:
    """Four writers (the group-commit inbox's) and a second inbox of another process,
    2,000 events over five keys in random groups: each key's numbers are 1..n, and the
    relay's walk order, (outbox_xid, id), is their order."""
    keys = [f"pi_{i}" for i in range(5)]
    rand = random.Random(7)
    events = [event(f"c{i}", rand.choice(keys)) for i in range(2000)]
    ingest = settings_mod.IngestSettings(writers=4, batch_max_rows=64, batch_window_us=200)

    def committed() -> None:
        """Nothing to publish in this test."""

    async with open_pool(database_url, max_size=12) as pool:
        inboxes = [GroupCommitInbox(pool, ingest, committed) for _ in range(2)]
        for inbox in inboxes:
            await inbox.start()
        try:
            # Each event twice, to two processes: one records it, the other is a duplicate.
            results = await asyncio.gather(
                *(inboxes[i % 2].accept(e) for i, e in enumerate(events)),
                *(inboxes[(i + 1) % 2].accept(e) for i, e in enumerate(events)),
            )
        finally:
            for inbox in inboxes:
                await inbox.close()
    assert sorted(r.value for r in results).count("accepted") == len(events)
    found = await rows(database_url)
    assert len(found) == len(events)
    by_key = numbers_by_key(found)
    for key, numbers in by_key.items():
        assert numbers == list(range(1, len(numbers) + 1)), key  # walk order = number order
    assert sum(len(n) for n in by_key.values()) == len(events)
    assert await counters(database_url) == {k: len(n) for k, n in by_key.items()}


async def test_only_events_settlement_consumes_are_keyed_and_the_stream_carries_the_numbers(
    database_url: str, nats_url: str
) -> None:
    """Over HTTP: a payment intent's events (one of them twice) are numbered and their
    messages carry the key and number; a customer event (no subject settlement takes,
    with `[settlement] subjects` narrowed from its default of everything) and an unkeyed
    GitHub event are not; internal events take the Ordering-Key header or their subject."""
    subjects = ["webhooks.*.payment_intent.succeeded", "webhooks.*.charge.refunded",
                "events.>"]  # fmt: skip
    doc = config(database_url, nats_url, settlement={"subjects": subjects})
    pi = {"id": "pi_42", "amount": 1200}
    async with running_server(doc) as gw:
        bodies = [
            ("evt_1", "payment_intent.succeeded", {"object": pi}),
            ("evt_2", "charge.refunded", {"object": {"id": "ch_1", "payment_intent": "pi_42"}}),
            ("evt_3", "customer.updated", {"object": {"id": "cus_1"}}),
        ]
        for event_id, event_type, data in bodies * 2:  # the second round: duplicates
            body = orjson.dumps({"id": event_id, "type": event_type, "data": data})
            d = deliver("stripe", event_id, event_type, body=body)
            assert (await gw.client.post(d.path, content=d.body, headers=d.headers)).is_success
        gh = deliver("github", "gh-1", "payment_intent.succeeded")
        assert (await gw.client.post(gh.path, content=gh.body, headers=gh.headers)).is_success
        auth = {"Authorization": f"Bearer {BILLING_TOKEN}"}
        for i, extra in enumerate([{"Ordering-Key": "order-9"}, {}, {"Ordering-Key": "order-9"}]):
            answer = await gw.client.post(
                "/v1/events",
                content=orjson.dumps({"type": "payment.captured", "data": {"n": i}}),
                headers={**auth, "Idempotency-Key": f"svc-{i}", **extra},
            )
            assert answer.is_success

        async def all_published() -> bool:
            return len(await stream_messages(nats_url)) == 7

        await wait_until(all_published, timeout_s=20)
    found = {(r["provider"], r["event_id"]): (r["order_key"], r["key_seq"])
             for r in await rows(database_url)}  # fmt: skip
    assert found == {
        ("stripe", "evt_1"): ("pi_42", 1),
        ("stripe", "evt_2"): ("pi_42", 2),
        ("stripe", "evt_3"): (None, None),  # customer.updated: settlement does not take it
        ("github", "gh-1"): (None, None),  # GitHub: no key by default
        ("service:billing", "svc-0"): ("order-9", 1),
        ("service:billing", "svc-1"): ("events.billing.payment.captured", 1),
        ("service:billing", "svc-2"): ("order-9", 2),
    }
    on_stream = {
        h["Nats-Msg-Id"]: (h.get("Gateway-Order-Key"), h.get("Gateway-Key-Seq"))
        for _, h, _ in await stream_messages(nats_url)
    }
    assert on_stream == {
        f"{p}:{e}": (k, None if n is None else str(n)) for (p, e), (k, n) in found.items()
    }


async def test_with_ordering_off_nothing_is_keyed_or_numbered(
    database_url: str, nats_url: str
) -> None:
    doc = config(database_url, nats_url, ordering={"enabled": False})
    async with running_server(doc) as gw:
        d = deliver("stripe", "evt_off", "payment_intent.succeeded")
        assert (await gw.client.post(d.path, content=d.body, headers=d.headers)).is_success
        answer = await gw.client.post(
            "/v1/events",
            content=orjson.dumps({"type": "payment.captured", "data": {}}),
            headers={
                "Authorization": f"Bearer {BILLING_TOKEN}",
                "Idempotency-Key": "s",
                "Ordering-Key": "order-1",
            },
        )
        assert answer.is_success

        async def published() -> bool:
            return len(await stream_messages(nats_url)) == 2

        await wait_until(published, timeout_s=20)
    assert [(r["order_key"], r["key_seq"]) for r in await rows(database_url)] == [(None, None)] * 2
    assert await counters(database_url) == {}
    for _, headers, _ in await stream_messages(nats_url):
        assert "Gateway-Order-Key" not in headers and "Gateway-Key-Seq" not in headers


@pytest.mark.parametrize("order_key", [[], ["/data/object/customer"]])
async def test_a_providers_own_rules_replace_the_schemes(
    database_url: str, nats_url: str, order_key: list[str]
) -> None:
    doc = config(database_url, nats_url)
    doc["providers"]["stripe"]["order_key"] = order_key
    body = orjson.dumps({"id": "evt_c", "type": "payment_intent.succeeded",
                         "data": {"object": {"id": "pi_1", "customer": "cus_7"}}})  # fmt: skip
    async with running_server(doc) as gw:
        d = deliver("stripe", "evt_c", "payment_intent.succeeded", body=body)
        assert (await gw.client.post(d.path, content=d.body, headers=d.headers)).is_success
    [row] = await rows(database_url)
    assert (row["order_key"], row["key_seq"]) == (("cus_7", 1) if order_key else (None, None))


async def test_a_parked_event_replayed_once_valid_takes_its_keys_next_number(
    tmp_path: Path, database_url: str, nats_url: str
) -> None:
    """An event parked at ingest (no type) has no number; replayed with the fixed config
    it is numbered after its key's events recorded meanwhile, and its message says so."""
    doc = config(database_url, nats_url)
    doc["providers"]["hmac"]["order_key"] = ["/data/id"]

    def body(event_id: str) -> bytes:
        return orjson.dumps({"event_id": event_id, "type": "payment_intent.succeeded",
                             "data": {"id": "pi_r"}})  # fmt: skip

    async with running_server(doc) as gw:
        for event_id, event_type in (("h1", "payment_intent.succeeded"), ("h2", None),
                                     ("h3", "payment_intent.succeeded")):  # fmt: skip
            d = deliver("hmac", event_id, event_type, body=body(event_id))
            assert (await gw.client.post(d.path, content=d.body, headers=d.headers)).is_success
    numbered = {r["event_id"]: r["key_seq"] for r in await rows(database_url)}
    assert numbered == {"h1": 1, "h2": None, "h3": 2}

    doc["providers"]["hmac"]["event_type_from"] = "json:type"  # the operator's fix
    path = write_toml(tmp_path / "fixed.toml", doc)
    replay = ("dlq", "replay", "--all", "--stage", "ingest", "--config", str(path))
    for _ in range(2):  # the second replay finds it resolved: no second number
        done = await asyncio.to_thread(invoke, *replay, env=os.environ)  # inherited, as before
        done.check_returncode()
    assert numbered | {"h2": 3} == {r["event_id"]: r["key_seq"] for r in await rows(database_url)}
    assert await counters(database_url) == {("hmac", "pi_r"): 3}

    async def replayed() -> list[dict[str, str]]:
        return [h for _, h, _ in await stream_messages(nats_url) if h["Nats-Msg-Id"] == "hmac:h2"]

    [headers] = await wait_until(replayed)
    assert (headers["Gateway-Order-Key"], headers["Gateway-Key-Seq"]) == ("pi_r", "3")


async def test_backfilled_events_are_keyed_and_numbered_like_live_ones(
    database_url: str, nats_url: str
) -> None:
    """Four events of one payment intent, two delivered live: backfill records the other
    two after them with the next numbers, and publishes them with both headers."""
    doc = config(database_url, nats_url)
    now = datetime.now(UTC).replace(microsecond=0)
    events = [stripe_event(n, now - timedelta(minutes=50 - 10 * n)) for n in range(4)]
    for e in events:
        e["data"]["object"]["id"] = "pi_same"
    async with running_apis() as apis, running_server(doc) as gw:
        apis.stripe_events = events
        for e in events[::2]:
            d = deliver("stripe", e["id"], body=orjson.dumps(e))
            assert (await gw.client.post(d.path, content=d.body, headers=d.headers)).is_success
        doc["providers"]["stripe"] |= stand_in_keys(apis.url)
        settings = settings_mod.parse(doc, env={"PROVIDER_API_KEY": API_KEY})
        async with backfill_parts(settings, "stripe") as parts:
            report = await backfill(parts, Window(now - timedelta(hours=1), now))
        assert report.tally.recovered == 2 and report.unpublished == 0
    found = {r["event_id"]: (r["order_key"], r["key_seq"]) for r in await rows(database_url)}
    live, recovered = [e["id"] for e in events[::2]], [e["id"] for e in events[1::2]]
    assert {found[i] for i in live} == {("pi_same", 1), ("pi_same", 2)}
    assert {found[i] for i in recovered} == {("pi_same", 3), ("pi_same", 4)}

    async def all_four() -> list[dict[str, str]]:
        found = [h for _, h, _ in await stream_messages(nats_url)]
        return found if len(found) == 4 else []

    for headers in await wait_until(all_four, timeout_s=20):
        event_id = headers["Gateway-Event-Id"]
        assert (headers["Gateway-Order-Key"], int(headers["Gateway-Key-Seq"])) == found[event_id]


async def test_a_keys_idle_clock_moves_once_it_is_an_hour_old(database_url: str) -> None:
    """Retention's `touched_at`: refreshed by a new event once over an hour old (an active
    key never looks idle), and left as it is within the hour (the update stays in place)."""
    async with open_pool(database_url) as pool, pool.acquire() as conn:
        await record_events(conn, [event("t1", "k_old"), event("t2", "k_new")])
        await conn.execute(
            "UPDATE order_counters SET touched_at = now() - CASE order_key "
            "WHEN 'k_old' THEN interval '61 minutes' ELSE interval '59 minutes' END"
        )
        await record_events(conn, [event("t3", "k_old"), event("t4", "k_new")])
        ages = {
            r["order_key"]: r["age_s"]
            for r in await conn.fetch(
                "SELECT order_key, extract(epoch FROM now() - touched_at) AS age_s "
                "FROM order_counters"
            )
        }
    assert ages["k_old"] < 60
    assert 59 * 60 - 5 < ages["k_new"] < 60 * 60
    assert await counters(database_url) == {("stripe", "k_old"): 2, ("stripe", "k_new"): 2}


async def test_a_group_tried_as_one_statement_leaves_nothing_when_a_keyed_row_repeats(
    database_url: str,
) -> None:
    """A group of new events is numbered by one statement outside a transaction; one
    that meets a keyed repeat fails as a whole (no row, no counter moved, no lock kept)
    and is recorded the transaction's way instead."""
    first = [event("w1", "k"), event("w2", "j")]
    async with open_pool(database_url) as pool, pool.acquire() as conn:
        keyed = _keyed_rows(first)
        made = await insert_numbered_whole(conn, _rows_json(first, keyed), keyed)
        assert made is not None
        assert {r["event_id"]: r["key_seq"] for r in made} == {"w1": 1, "w2": 1}
        again = [event("w3", "k"), event("w1", "k"), event("u9", None)]
        keyed = _keyed_rows(again)
        assert await insert_numbered_whole(conn, _rows_json(again, keyed), keyed) is None
        assert not conn.is_in_transaction()
        assert await counters(database_url) == {("stripe", "k"): 1, ("stripe", "j"): 1}
        assert [r["event_id"] for r in await rows(database_url)] == ["w1", "w2"]
        recorded = await record_events(conn, again)
    assert {k[1]: v.key_seq for k, v in recorded.items()} == {"w3": 2, "u9": None}
    assert numbers_by_key(await rows(database_url)) == {
        ("stripe", "k"): [1, 2],
        ("stripe", "j"): [1],
    }
    assert await counters(database_url) == {("stripe", "k"): 2, ("stripe", "j"): 1}
