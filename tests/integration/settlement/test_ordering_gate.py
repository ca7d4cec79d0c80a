"""The ordering gate in the settlement worker, on a real PostgreSQL ledger: the worker's
`handle` is fed batches from an in-memory stream (shuffled, with duplicates and lost
acks), and what it leaves is read from the ledger, `order_log` and the dead letters."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import asyncpg
import orjson
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from gateway import settings as settings_mod
from gateway.core.events.model import Event
from gateway.core.ledger.ids import merchant_account
from gateway.settlement.ordered.gate import FOLLOW_SHARE, OrderedGate
from gateway.settlement.ordered.holding import WaitingRoom
from gateway.settlement.ordered.round import RoundSettler
from gateway.settlement.parts import SettlementParts
from gateway.settlement.worker import SettlementWorker
from gateway.wiring.settlement import settlement_parts
from tests.support.gateway import config
from tests.support.ordered_stream import MemoryStream, Payment, Published
from tests.support.ordering_property import violations
from tests.support.settlement import merchant_balance, settlement_sections
from tests.support.stub import Stub


def settings_doc(
    database_url: str, nats_url: str, stub: Stub, redis_url: str, **ordering: Any
) -> dict[str, Any]:
    sections = settlement_sections(stub.url, redis_url, ordering=ordering)
    return config(database_url, nats_url, **sections)


@pytest.fixture
async def parts(
    database_url: str, nats_url: str, stub: Stub, redis_url: str
) -> AsyncIterator[SettlementParts]:
    doc = settings_doc(database_url, nats_url, stub, redis_url)
    async with settlement_parts(settings_mod.parse(doc, env={})) as p:
        await p.settler.open_clearing_accounts()
        yield p


@pytest.fixture
async def conn(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    c = await asyncpg.connect(database_url)
    yield c
    await c.close()


async def drain(
    worker: SettlementWorker,
    stream: MemoryStream,
    rand: random.Random,
    *,
    max_batch: int = 64,
    lost_ack_p: float = 0.0,
    limit: int = 2000,
) -> None:
    """Hand out batches until nothing is pending or held by the gate, as the worker's
    loop does (an empty batch plans the held messages again); an ack is lost now and
    then (the message comes back, as after ack_wait)."""
    for _ in range(limit):
        if not stream.pending and not worker.holding:
            return
        batch = stream.fetch(rand.randint(1, max_batch), rand) if stream.pending else []
        if not batch:
            await asyncio.sleep(0.02)
        await worker.handle(batch)  # type: ignore[arg-type]  # Delivery-shaped messages
        stream.redeliver_unanswered(batch)
        for msg in batch:
            if msg.answer == "ack" and rand.random() < lost_ack_p:
                stream.lose_ack(msg)
    raise AssertionError(f"not drained: {len(stream.pending)} pending")


async def open_merchants(parts: SettlementParts, merchants: Sequence[str]) -> None:
    await parts.ledger.ensure_accounts([merchant_account(m, "USD") for m in merchants])


async def posting_order(conn: asyncpg.Connection, payment_id: str) -> list[str]:
    """The payment's transfers in the order the ledger took them: 'capture' or the
    refund id, one per transfer."""
    rows = await conn.fetch(
        "SELECT s.kind, s.refund_id, t.created_at FROM ledger_transfers t"
        " JOIN settlements s ON s.transfer_id = t.id"
        " WHERE t.settlement_id = $1 ORDER BY t.created_at",
        payment_id,
    )
    times = [r["created_at"] for r in rows]
    assert times == sorted(set(times)), f"{payment_id}: two transfers in one transaction"
    return [r["refund_id"] or "capture" for r in rows]


def metric_total(values: dict[Any, float]) -> float:
    return sum(values.values())


PERMUTATIONS = settings(
    max_examples=4,
    derandomize=True,
    database=None,
    deadline=None,
    # No shrinking: each example is a whole drain (seconds), and a failing one is
    # readable as it is (its seed and refund counts).
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@PERMUTATIONS
@given(
    refunds=st.lists(st.integers(min_value=0, max_value=7), min_size=50, max_size=50),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
async def test_any_order_of_delivery_settles_each_payment_in_its_order(
    parts: SettlementParts, conn: asyncpg.Connection, refunds: list[int], seed: int
) -> None:
    """50 payments, each a capture and 0-7 partial refunds, delivered shuffled in random
    batches, with a tenth published twice and a tenth of acks lost: every merchant ends
    with the in-order balance, the ledger took each payment's events in its order, and
    every key's log is 1, 2, ... with nothing unexplained."""
    rand = random.Random(seed)
    run = uuid.uuid4().hex[:8]
    payments = [
        Payment("billing", f"pay_{run}_{k}", f"m_{run}_{k}", 10_000,
                [rand.randint(1, 1000) for _ in range(n)])
        for k, n in enumerate(refunds)
    ]  # fmt: skip
    await open_merchants(parts, [p.merchant for p in payments])
    stream = MemoryStream()
    for p in payments:
        events = p.events()
        stream.publish(*events, *(e for e in events if rand.random() < 0.1))
    await drain(SettlementWorker(parts), stream, rand, lost_ack_p=0.1)

    for p in payments:
        assert await merchant_balance(parts, p.merchant) == p.balance_minor, p.payment_id
        expected = [
            "capture",
            *(f"{p.payment_id}_r{i}" for i in range(1, len(p.refunds_minor) + 1)),
        ]
        assert await posting_order(conn, p.payment_id) == expected
    log = await conn.fetch(
        "SELECT order_key, array_agg(key_seq ORDER BY id) AS seqs,"
        " array_agg(DISTINCT outcome) AS outcomes FROM order_log"
        " WHERE order_key LIKE $1 GROUP BY order_key",
        f"pay_{run}_%",
    )
    assert {r["order_key"]: list(r["seqs"]) for r in log} == {
        p.payment_id: list(range(1, len(p.refunds_minor) + 2)) for p in payments
    }
    assert {o for r in log for o in r["outcomes"]} == {"applied"}
    assert await violations(conn) == []
    assert not stream.out


async def test_a_refund_before_its_capture_is_deferred_and_both_settle(
    parts: SettlementParts, conn: asyncpg.Connection
) -> None:
    """The refund was numbered 1 and its capture 2: the refund fails for want of its
    payment, is deferred (counted once), the capture settles, then the refund on its
    own retry; nothing waits for ever."""
    await open_merchants(parts, ["m_rev"])
    payment = Payment("billing", "pay_rev", "m_rev", 5_000, [1_200])
    capture, refund = payment.events()
    stream = MemoryStream()
    stream.publish(
        type(refund)(**{**refund.__dict__, "key_seq": 1}),
        type(capture)(**{**capture.__dict__, "key_seq": 2}),
    )
    await drain(SettlementWorker(parts), stream, random.Random(1), max_batch=2, limit=50)

    assert await merchant_balance(parts, "m_rev") == 3_800
    rows = await conn.fetch(
        "SELECT key_seq, outcome, resolution FROM order_log WHERE order_key = 'pay_rev' ORDER BY id"
    )
    assert [(r["key_seq"], r["outcome"], r["resolution"]) for r in rows] == [
        (1, "deferred", "settled"),
        (2, "applied", None),
    ]
    assert metric_total(parts.metrics.order_deferred_total.values) == 1
    assert await violations(conn) == []


async def test_events_after_a_gap_wait_then_park_and_hold_their_key(
    database_url: str, nats_url: str, stub: Stub, redis_url: str, conn: asyncpg.Connection
) -> None:
    """Seq 1 never comes: 2 waits, held in the worker (counted once, told to the stream
    as in progress every third of ack_wait_s, never put back); once gap_timeout_s has
    passed it is parked as ORDER_PREDECESSOR_MISSING with its key held, and 3, arriving
    after, is parked behind it. Another key is not held up."""
    doc = settings_doc(database_url, nats_url, stub, redis_url, gap_timeout_s=1.5)
    async with settlement_parts(settings_mod.parse(doc, env={})) as parts:
        await parts.settler.open_clearing_accounts()
        await open_merchants(parts, ["m_gap", "m_ok"])
        worker = SettlementWorker(parts)
        _, second, third = Payment("billing", "pay_gap", "m_gap", 5_000, [100, 200]).events()
        fine = Payment("billing", "pay_ok", "m_ok", 700, []).events()
        stream = MemoryStream()
        stream.publish(second, *fine)
        first = stream.fetch(10)
        await worker.handle(first)  # type: ignore[arg-type]
        assert await merchant_balance(parts, "m_ok") == 700
        (waited,) = [m for m in first if m.event.order_key == "pay_gap"]
        assert (waited.answer, worker.holding, waited.progress) == (None, 1, 0)
        await asyncio.sleep(0.8)  # ack_wait_s is 2 s in these tests
        await worker.handle([])
        assert (waited.answer, worker.holding, waited.progress) == (None, 1, 1)
        assert parts.metrics.order_gap_waits_total.values == {
            (("provider", "service:billing"),): 1.0
        }
        await asyncio.sleep(0.8)  # past gap_timeout_s since it was stored
        stream.publish(third)
        later = stream.fetch(10)
        await worker.handle(later)  # type: ignore[arg-type]
        assert (waited.answer, worker.holding) == ("term", 0)
        assert [(m.event.key_seq, m.answer) for m in later] == [(3, "term")]
        assert await merchant_balance(parts, "m_gap") == 0

    dead = await conn.fetch(
        "SELECT event_id, error_class, order_key, key_seq, id FROM dlq_webhooks ORDER BY key_seq"
    )
    assert [(d["error_class"], d["order_key"], d["key_seq"]) for d in dead] == [
        ("ORDER_PREDECESSOR_MISSING", "pay_gap", 2),
        ("BLOCKED_BY_PREDECESSOR", "pay_gap", 3),
    ]
    held = await conn.fetchrow("SELECT * FROM order_applied WHERE order_key = 'pay_gap'")
    assert held is not None
    assert (held["applied_seq"], held["held_seq"], held["held_dlq_id"], held["hold_reason"]) == (
        0, 2, dead[0]["id"], "ORDER_PREDECESSOR_MISSING"
    )  # fmt: skip
    assert await violations(conn) == []


async def test_on_poison_skip_moves_the_key_past_a_parked_event(
    database_url: str, nats_url: str, stub: Stub, redis_url: str, conn: asyncpg.Connection
) -> None:
    """With on_poison = "skip", a capture for a merchant without an account is parked
    and its key moves past it: the log says 'skipped', explained by the dead letter, and
    the key's later event is applied in its turn (here a refund, which then waits for
    its payment on its own retries: deferred)."""
    doc = settings_doc(database_url, nats_url, stub, redis_url, on_poison="skip")
    async with settlement_parts(settings_mod.parse(doc, env={})) as parts:
        await parts.settler.open_clearing_accounts()
        stream = MemoryStream()
        stream.publish(*Payment("billing", "pay_skip", "m_none", 900, [100]).events())
        batch = stream.fetch(10)
        await SettlementWorker(parts).handle(batch)  # type: ignore[arg-type]
        assert sorted((m.event.key_seq, m.answer) for m in batch) == [(1, "term"), (2, "nak")]
    rows = await conn.fetch(
        "SELECT key_seq, outcome FROM order_log WHERE order_key = 'pay_skip' ORDER BY id"
    )
    assert [(r["key_seq"], r["outcome"]) for r in rows] == [(1, "skipped"), (2, "deferred")]
    held = await conn.fetchval("SELECT count(*) FROM order_applied WHERE held_seq IS NOT NULL")
    assert held == 0
    assert await violations(conn, live=True) == []


async def test_ordering_off_settles_keyed_messages_as_they_come(
    database_url: str, nats_url: str, stub: Stub, redis_url: str, conn: asyncpg.Connection
) -> None:
    """[ordering] enabled = false: a refund numbered 2 arriving alone is not held back
    by the gate (it fails for want of its payment, as before), and nothing is logged."""
    doc = settings_doc(database_url, nats_url, stub, redis_url, enabled=False)
    async with settlement_parts(settings_mod.parse(doc, env={})) as parts:
        await parts.settler.open_clearing_accounts()
        await open_merchants(parts, ["m_off"])
        capture, refund = Payment("billing", "pay_off", "m_off", 900, [100]).events()
        stream = MemoryStream()
        stream.publish(refund)
        batch = stream.fetch(10)
        await SettlementWorker(parts).handle(batch)  # type: ignore[arg-type]
        assert [m.answer for m in batch] == ["nak"]  # PaymentNotSettled, retried
        stream.publish(capture)
        again = stream.fetch(10)  # the refund again, and its capture: one batch
        await SettlementWorker(parts).handle(again)  # type: ignore[arg-type]
        assert [m.answer for m in again] == ["ack", "ack"]
        assert await merchant_balance(parts, "m_off") == 800
        assert parts.metrics.order_gap_waits_total.values == {}
    assert await conn.fetchval("SELECT count(*) FROM order_log") == 0
    assert await conn.fetchval("SELECT count(*) FROM order_applied") == 0


def in_euros(published: Published) -> Published:
    doc = orjson.loads(published.body)
    doc["data"]["currency"] = "EUR"
    return dataclasses.replace(published, body=orjson.dumps(doc))


async def test_an_event_behind_a_retrying_turn_waits_in_the_worker_with_its_budget_whole(
    parts: SettlementParts, conn: asyncpg.Connection, stub: Stub
) -> None:
    """The capture (seq 1, in EUR) cannot get a rate: it is retried by its schedule, and
    its refund (seq 2) is held in the worker meanwhile, not put back: once the rate is
    there, both settle in order and the refund settles on its first delivery."""
    await open_merchants(parts, ["m_fx"])
    capture, refund = Payment("billing", "pay_fx", "m_fx", 10_000, [1_000]).events()
    capture, refund = (in_euros(capture), in_euros(refund))
    await stub.control(mode="fail")
    worker = SettlementWorker(parts)
    stream = MemoryStream()
    stream.publish(capture, refund)
    batch = stream.fetch(10)
    await worker.handle(batch)  # type: ignore[arg-type]
    assert [m.answer for m in batch] == ["nak", None]  # the capture retried, the refund held
    assert worker.holding == 1
    await stub.control(mode="ok")
    await drain(worker, stream, random.Random(4), limit=200)

    assert [(m.answer, m.num_delivered) for m in batch] == [("nak", 1), ("ack", 1)]
    # EUR 100.00 at 1.08, and its refund of EUR 10.00 at the payment's rate.
    assert await merchant_balance(parts, "m_fx") == 10_800 - 1_080
    rows = await conn.fetch(
        "SELECT key_seq, outcome FROM order_log WHERE order_key = 'pay_fx' ORDER BY id"
    )
    assert [(r["key_seq"], r["outcome"]) for r in rows] == [(1, "applied"), (2, "applied")]


async def test_a_message_delivered_again_while_held_is_answered_once_and_never_lost(
    parts: SettlementParts, conn: asyncpg.Connection
) -> None:
    """The refund (2) waits for its capture (1), held in the worker, and the stream
    delivers it again (its ack_wait ran out while the worker was busy). The fresh
    delivery replaces the held one: neither is acked as a repeat of the other while the
    refund is unsettled, so when the worker stops and puts back what it holds, the
    refund is still on the stream, and settles once its capture comes."""
    await open_merchants(parts, ["m_again"])
    capture, refund = Payment("billing", "pay_again", "m_again", 900, [100]).events()
    worker = SettlementWorker(parts)
    stream = MemoryStream()
    stream.publish(refund)
    first = stream.fetch(10)
    await worker.handle(first)  # type: ignore[arg-type]
    assert worker.holding == 1 and [m.answer for m in first] == [None]
    stream.redeliver_unanswered(first)  # ack_wait ran out: delivered again
    again = stream.fetch(10)
    assert [m.num_delivered for m in again] == [2]
    await worker.handle(again)  # type: ignore[arg-type]
    assert [m.answer for m in first + again] == [None, None]
    assert worker.holding == 1
    await worker.put_back()  # stopping
    assert [m.answer for m in again] == ["nak"]
    stream.publish(capture)
    await drain(worker, stream, random.Random(3))
    assert await merchant_balance(parts, "m_again") == 800
    assert await violations(conn) == []


async def drain_in_flight(
    worker: SettlementWorker, stream: MemoryStream, *, batch: int, in_flight: int = 3
) -> None:
    """As the worker's loop: batches fetched in stream order, up to `in_flight` of them
    settling at once, and an empty batch now and then while the gate holds messages."""
    running: set[asyncio.Task[None]] = set()
    for _ in range(2000):
        while stream.pending and len(running) < in_flight:
            fetched = stream.fetch(batch)
            running.add(asyncio.create_task(worker.handle(fetched)))  # type: ignore[arg-type]
        if running:
            done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
        elif worker.holding:
            await asyncio.sleep(0.02)
            await worker.handle([])
        else:
            return
    raise AssertionError(f"not drained: {len(stream.pending)} pending")


def record_kept(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The event ids of the messages each batch keeps back behind a batch in flight
    (one list per batch handled; a batch keeps them before it first waits)."""
    kept: list[list[str]] = []
    keep_behind = WaitingRoom.keep_behind
    handle = OrderedGate.handle

    def recording(room: WaitingRoom, msg: Any, item: tuple[Event, int]) -> None:
        kept[-1].append(item[0].event_id)
        keep_behind(room, msg, item)

    async def handling(gate: OrderedGate, fetched: Any, read: Any) -> None:
        kept.append([])
        await handle(gate, fetched, read)

    monkeypatch.setattr(WaitingRoom, "keep_behind", recording)
    monkeypatch.setattr(OrderedGate, "handle", handling)
    return kept


async def test_batches_in_flight_together_settle_each_key_in_order(
    parts: SettlementParts, conn: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100 payments of five events each on the stream key after key, as a busy stream
    carries them, settled three batches at a time: a batch's few messages of keys an
    earlier batch in flight is still moving are kept back for a later batch that finds
    their keys free (the path is taken), and every payment settles in its order with
    the in-order balance and a gapless log."""
    run = uuid.uuid4().hex[:8]
    payments = [
        Payment("billing", f"pay_{run}_{k}", f"m_{run}_{k}", 10_000, [100, 200, 300, 400])
        for k in range(100)
    ]
    await open_merchants(parts, [p.merchant for p in payments])
    stream = MemoryStream()
    by_payment = [p.events() for p in payments]
    for seq in range(5):  # key after key: a batch of 55 shares a few keys with the last
        stream.publish(*(events[seq] for events in by_payment))
    kept = record_kept(monkeypatch)
    await drain_in_flight(SettlementWorker(parts), stream, batch=55)

    assert any(kept), "no batch kept a message back: the test missed its path"
    # At most a quarter of the batch behind each earlier batch in flight (two of them).
    in_flight_before = SettlementWorker.batches_in_flight - 1
    assert max(map(len, kept)) <= in_flight_before * FOLLOW_SHARE * 55
    # Nothing was planned against a position about to move: no message ever waited.
    assert metric_total(parts.metrics.order_gap_waits_total.values) == 0
    for p in payments:
        assert await merchant_balance(parts, p.merchant) == p.balance_minor, p.payment_id
        expected = ["capture", *(f"{p.payment_id}_r{i}" for i in range(1, 5))]
        assert await posting_order(conn, p.payment_id) == expected
    log = await conn.fetch(
        "SELECT order_key, array_agg(key_seq ORDER BY id) AS seqs FROM order_log"
        " WHERE order_key LIKE $1 GROUP BY order_key",
        f"pay_{run}_%",
    )
    assert {r["order_key"]: list(r["seqs"]) for r in log} == {
        p.payment_id: [1, 2, 3, 4, 5] for p in payments
    }
    assert await violations(conn) == []
    assert not stream.out and not stream.pending and not stream.twice


async def test_a_message_delivered_again_while_held_and_its_key_busy_is_never_lost(
    parts: SettlementParts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refund waits in the worker for its capture; a batch in flight takes it and
    holds it again while the stream delivers it again (its ack_wait ran out) in a batch
    that keeps it back for later, its key being busy. The worker plans one delivery
    of it, so it is not acked as a repeat of itself: stopped, the worker gives it back,
    and once its capture comes the refund settles."""
    await open_merchants(parts, ["m_dup", *(f"m_o{i}" for i in range(3))])
    capture, refund, refund_2 = Payment("billing", "pay_dup", "m_dup", 900, [100, 100]).events()
    others = [Payment("billing", f"pay_o{i}", f"m_o{i}", 500, []).events()[0] for i in range(3)]
    kept = record_kept(monkeypatch)
    worker = SettlementWorker(parts)
    stream = MemoryStream()
    stream.publish(refund)
    first = stream.fetch(10)
    await worker.handle(first)  # type: ignore[arg-type]
    assert worker.holding == 1  # waiting for its capture
    stream.publish(refund_2)
    in_flight = asyncio.create_task(worker.handle(stream.fetch(10)))  # type: ignore[arg-type]
    await asyncio.sleep(0)  # it has taken the held refund: their key is its own
    stream.redeliver_unanswered(first)  # ack_wait ran out: the refund comes again
    stream.publish(*others)
    await worker.handle(stream.fetch(10))  # type: ignore[arg-type]  # 1 of 4: kept back
    await in_flight
    assert [ids for ids in kept if ids] == [["pay_dup_e2"]]
    await worker.handle([])
    await worker.put_back()  # stopping: what is held goes back to the stream
    assert ("pay_dup_e2", "ack") not in [(e.event_id, a) for e, a in stream.answers]
    stream.publish(capture)
    await drain(worker, stream, random.Random(3))

    assert await merchant_balance(parts, "m_dup") == 700
    assert not stream.twice


async def test_a_payload_read_ahead_of_its_batch_is_parked_as_its_own_error(
    parts: SettlementParts, conn: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch reads its bodies while it waits for an earlier batch sharing its keys: a
    body that is not JSON is still parked with its own error and holds only its key,
    and every payment around it settles in its order."""
    run = uuid.uuid4().hex[:8]
    payments = [
        Payment("billing", f"pay_{run}_{k}", f"m_{run}_{k}", 10_000, [100, 200]) for k in range(60)
    ]
    await open_merchants(parts, [p.merchant for p in payments])
    bad = dataclasses.replace(payments[0].events()[0], body=b"{not json")
    stream = MemoryStream()
    by_payment = [p.events() for p in payments]
    stream.publish(*(events[0] for events in by_payment[1:]))
    for seq in (1, 2):  # the later batches wait for the earlier ones, sharing their keys
        stream.publish(*(events[seq] for events in by_payment[1:]))
    stream.publish(bad, *by_payment[0][1:])
    read_ahead: list[int] = []
    original = RoundSettler.read_ahead

    def recording(settler: RoundSettler, events: Sequence[Event]) -> None:
        read_ahead.append(len(events))
        original(settler, events)

    reads: dict[str, int] = {}  # how often each body was read into an instruction
    instruction = parts.settler.instruction

    def counting(event: Event) -> Any:
        reads[event.event_id] = reads.get(event.event_id, 0) + 1
        return instruction(event)

    monkeypatch.setattr(RoundSettler, "read_ahead", recording)
    monkeypatch.setattr(parts.settler, "instruction", counting)
    await drain_in_flight(SettlementWorker(parts), stream, batch=25)

    assert read_ahead and sum(read_ahead) >= 3 * 60
    # Read once, ahead, and settled from that; only a message kept back for a later
    # batch (its own batch ended meanwhile) is read again there.
    assert sum(1 for n in reads.values() if n == 1) >= 0.8 * len(reads)
    parked = await conn.fetch(
        "SELECT event_id, error_class, key_seq FROM dlq_webhooks WHERE order_key = $1"
        " ORDER BY key_seq",
        payments[0].payment_id,
    )
    assert [(r["event_id"], r["error_class"], r["key_seq"]) for r in parked] == [
        (bad.event_id, "PAYLOAD_NOT_JSON", 1),
        (by_payment[0][1].event_id, "BLOCKED_BY_PREDECESSOR", 2),
        (by_payment[0][2].event_id, "BLOCKED_BY_PREDECESSOR", 3),
    ]
    for p in payments[1:]:
        assert await merchant_balance(parts, p.merchant) == p.balance_minor, p.payment_id
    assert await violations(conn) == []
    assert not stream.pending


async def test_a_batch_sharing_keys_settles_while_the_earlier_one_is_still_answering(
    parts: SettlementParts, conn: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a batch's moves are committed and none of its turns failed, a later batch of
    the same keys plans and settles at once: it does not wait for the earlier batch's
    messages to be answered."""
    run = uuid.uuid4().hex[:8]
    payments = [
        Payment("billing", f"pay_{run}_{k}", f"m_{run}_{k}", 10_000, [300]) for k in range(10)
    ]
    await open_merchants(parts, [p.merchant for p in payments])
    stream = MemoryStream()
    stream.publish(*(p.events()[0] for p in payments))
    stream.publish(*(p.events()[1] for p in payments))
    captures, refunds = stream.fetch(10), stream.fetch(10)
    worker = SettlementWorker(parts)
    answering = asyncio.Event()
    go_on = asyncio.Event()
    settled = SettlementWorker.settled

    async def held_up(self: SettlementWorker, msg: Any, *args: Any) -> None:
        if msg in captures:  # the first batch's answers wait
            answering.set()
            await go_on.wait()
        await settled(self, msg, *args)

    monkeypatch.setattr(SettlementWorker, "settled", held_up)
    first = asyncio.create_task(worker.handle(captures))  # type: ignore[arg-type]
    await asyncio.wait_for(answering.wait(), timeout=10)
    await asyncio.wait_for(worker.handle(refunds), timeout=10)  # type: ignore[arg-type]

    assert [m.answer for m in refunds] == ["ack"] * 10
    assert all(m.answer is None for m in captures)  # still being answered
    for p in payments:
        assert await merchant_balance(parts, p.merchant) == p.balance_minor, p.payment_id
    go_on.set()
    await first
    assert [m.answer for m in captures] == ["ack"] * 10
    assert await violations(conn) == []


def refund_first(payment_id: str, merchant: str, delivered: int) -> tuple[MemoryStream, Published]:
    """A payment of 5,000 and its refund of 1,200 on one key: the refund numbered 1 and
    already delivered `delivered` times, then the capture numbered 2; (stream, refund)."""
    capture, refund = Payment("billing", payment_id, merchant, 5_000, [1_200]).events()
    refund = dataclasses.replace(refund, key_seq=1)
    stream = MemoryStream()
    stream.publish(refund)
    stream.pending[0] = (refund, delivered, stream.pending[0][2])
    stream.publish(dataclasses.replace(capture, key_seq=2))
    return stream, refund


async def key_log(conn: asyncpg.Connection, order_key: str) -> list[tuple[int, str, str | None]]:
    """The key's `order_log`: (number, outcome, resolution) in the order written."""
    rows = await conn.fetch(
        "SELECT key_seq, outcome, resolution FROM order_log WHERE order_key = $1 ORDER BY id",
        order_key,
    )
    return [(r["key_seq"], r["outcome"], r["resolution"]) for r in rows]


async def test_a_refund_out_of_retries_at_its_first_turn_is_parked_and_its_capture_settles(
    parts: SettlementParts, conn: asyncpg.Connection
) -> None:
    """The refund (number 1) reaches its first turn with its schedule already spent: it
    is parked, and its key still moves past it (deferred, closed as parked), so the
    capture (number 2) settles rather than being parked behind it."""
    await open_merchants(parts, ["m_late"])
    # The schedule has three delays: a tenth delivery is past it.
    stream, refund = refund_first("pay_late", "m_late", delivered=9)
    worker = SettlementWorker(parts)
    first = stream.fetch(1)
    await worker.handle(first)  # type: ignore[arg-type]
    assert [m.answer for m in first] == ["term"]
    await drain(worker, stream, random.Random(1), max_batch=2, limit=50)

    assert await merchant_balance(parts, "m_late") == 5_000
    assert await key_log(conn, "pay_late") == [
        (1, "deferred", "parked"),
        (2, "applied", None),
    ]
    parked = await conn.fetch(
        "SELECT event_id, error_class FROM dlq_webhooks WHERE order_key = 'pay_late'"
    )
    assert [(r["event_id"], r["error_class"]) for r in parked] == [
        (refund.event_id, "PAYMENT_NOT_SETTLED")
    ]
    assert await violations(conn) == []


async def test_a_refund_out_of_retries_whose_key_did_not_move_waits_for_its_turn_again(
    parts: SettlementParts, conn: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deferred with its schedule spent, but the key's move fails to commit: the refund
    is put back (parked then, it would leave its key neither moved nor held and its
    capture waiting for ever); next time the move commits, it is parked and the
    capture settles."""
    from gateway.adapters.postgres.ordering import key_moves

    await open_merchants(parts, ["m_nomove"])
    stream, _ = refund_first("pay_nomove", "m_nomove", delivered=9)
    real_advance = key_moves.advance

    async def fails(*args: Any) -> None:
        raise ConnectionError("the move's transaction did not commit")

    monkeypatch.setattr(key_moves, "advance", fails)
    worker = SettlementWorker(parts)
    first = stream.fetch(1)
    await worker.handle(first)  # type: ignore[arg-type]
    assert [m.answer for m in first] == ["nak"]
    assert await conn.fetchval("SELECT count(*) FROM dlq_webhooks") == 0
    monkeypatch.setattr(key_moves, "advance", real_advance)
    await drain(worker, stream, random.Random(1), max_batch=2, limit=50)

    assert await merchant_balance(parts, "m_nomove") == 5_000
    assert await key_log(conn, "pay_nomove") == [
        (1, "deferred", "parked"),
        (2, "applied", None),
    ]
    assert await violations(conn) == []


async def test_deliveries_handed_back_untried_spend_no_retries(
    parts: SettlementParts, conn: asyncpg.Connection
) -> None:
    """A worker stepping aside hands the refund back nine times before it is tried: its
    first try is still attempt 1, so it is deferred with its retries ahead, and settles
    once its capture has."""
    await open_merchants(parts, ["m_aside"])
    capture, refund = Payment("billing", "pay_aside", "m_aside", 5_000, [1_200]).events()
    stream = MemoryStream()
    stream.publish(dataclasses.replace(refund, key_seq=1))
    worker = SettlementWorker(parts)
    for _ in range(9):
        batch = stream.fetch(1)
        await worker.hand_back(batch)  # type: ignore[arg-type]
        assert [m.answer for m in batch] == ["nak"]
    assert stream.pending[0][1] == 9
    stream.publish(dataclasses.replace(capture, key_seq=2))
    await drain(worker, stream, random.Random(1), max_batch=2, limit=50)

    assert await merchant_balance(parts, "m_aside") == 3_800
    assert await key_log(conn, "pay_aside") == [
        (1, "deferred", "settled"),
        (2, "applied", None),
    ]
    assert (
        await conn.fetchval("SELECT count(*) FROM dlq_webhooks WHERE order_key = 'pay_aside'") == 0
    )
