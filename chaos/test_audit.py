"""The audit catches what it is there to catch: a planted loss, a planted double posting, a
transfer nobody asked for, a message missing from the stream, and a key applied out of
sequence."""

from __future__ import annotations

from decimal import Decimal

import asyncpg
import nats
import pytest

from chaos.audit import judge, transfer_key
from chaos.loadgen import Answer, LoadRecord
from chaos.observe import DeadLetter, Observed
from chaos.workload import LoadSpec, plan

# --- the verdict alone, on made-up observations ----------------------------------------


def clean_run() -> tuple[LoadRecord, Observed]:
    """A run where every event got one 2xx and the stores hold exactly what they should."""
    spec = LoadSpec(events=40, forged=0.05, unknown_merchant=0.2, seed=7)
    record = LoadRecord("r1", spec, plan(spec, "r1"))
    seen = Observed(stream=None, ledger_ok=True, ledger_text="balanced")
    for e in record.events:
        if e.kind == "forged":
            record.answers.append(Answer(e.index, 1, 1, 401, "signature_mismatch", 0, 0))
            continue
        record.answers.append(Answer(e.index, 1, 1, 200, "accepted", 0, 0))
        seen.rows[(e.provider, e.event_id)] = True
        if e.expect_parked:
            seen.open_dlq[(e.provider, e.event_id)] = [
                DeadLetter("settlement", "UNKNOWN_MERCHANT", "no account")
            ]
        elif e.settles:
            seen.transfers[transfer_key(e)] += 1
    return record, seen


def first(record: LoadRecord, kind: str):  # type: ignore[no-untyped-def]
    return next(e for e in record.events if e.kind == kind and not e.expect_parked)


def test_a_clean_run_passes():
    record, seen = clean_run()
    result = judge("clean", record, seen)
    assert result.ok, result.table()
    assert result.figures["parked"] and result.figures["unexpected_parked"] == 0


def plant_missing_row(record, seen):  # type: ignore[no-untyped-def]
    e = first(record, "other")
    del seen.rows[(e.provider, e.event_id)]


def plant_unpublished(record, seen):  # type: ignore[no-untyped-def]
    e = first(record, "other")
    seen.rows[(e.provider, e.event_id)] = False


def plant_missing_transfer(record, seen):  # type: ignore[no-untyped-def]
    del seen.transfers[transfer_key(first(record, "payment"))]


def plant_reasonless_dead_letter(record, seen):  # type: ignore[no-untyped-def]
    e = first(record, "refund")
    del seen.transfers[transfer_key(e)]
    seen.open_dlq[(e.provider, e.event_id)] = [DeadLetter("settlement", "", "")]


def plant_double_transfer(record, seen):  # type: ignore[no-untyped-def]
    seen.transfers[transfer_key(first(record, "refund"))] += 1


def plant_accepted_twice(record, seen):  # type: ignore[no-untyped-def]
    e = first(record, "payment")
    record.answers.append(Answer(e.index, 2, 1, 200, "accepted", 0, 0))


def plant_phantom_transfer(record, seen):  # type: ignore[no-untyped-def]
    seen.transfers[transfer_key(first(record, "forged"))] += 1


def plant_forged_row(record, seen):  # type: ignore[no-untyped-def]
    e = first(record, "forged")
    seen.rows[(e.provider, e.event_id)] = True


def plant_unbalanced_ledger(record, seen):  # type: ignore[no-untyped-def]
    seen.ledger_ok = False


def plant_order_violation(record, seen):  # type: ignore[no-untyped-def]
    seen.order_violations = ["stripe pi_x: seq 3 logged after 1"]


@pytest.mark.parametrize(
    ("plant", "figure"),
    [
        (plant_missing_row, "lost"),  # a 2xx without a row
        (plant_unpublished, "lost"),  # a row that never reached the stream
        (plant_missing_transfer, "lost"),  # settled nowhere and parked nowhere
        (plant_reasonless_dead_letter, "lost"),  # parked without a reason is not an outcome
        (plant_double_transfer, "doubled"),  # two transfers for one settlement
        (plant_accepted_twice, "doubled"),  # the idempotency gate said "accepted" twice
        (plant_phantom_transfer, "phantom"),  # money moved for an event never accepted
        (plant_forged_row, "phantom"),  # a refused delivery was recorded
        (plant_unbalanced_ledger, "ledger_balanced"),
        (plant_order_violation, "order_violations"),  # a key applied out of sequence
    ],
)
def test_each_planted_fault_fails_the_audit(plant, figure):
    record, seen = clean_run()
    plant(record, seen)
    result = judge("planted", record, seen)
    assert not result.ok
    assert result.figures[figure] in (1, False), result.table()
    assert result.problems


# --- the whole audit, against real stores -------------------------------------------------


async def test_audit_catches_planted_loss_and_double_posting_in_real_stores(
    make_scenario, database_url, nats_node
):
    sc = make_scenario("audit_planted", database_url, nats_node.url)
    await sc.open_merchants()
    sc.serve()
    sc.settle()
    await sc.ready("serve")
    record = await sc.load(LoadSpec(events=40, seed=3)).run()
    assert (await sc.finish(record)).ok

    conn = await asyncpg.connect(database_url)
    try:
        # 1. A double posting that keeps the ledger balanced: `ledger check` alone passes.
        paid = first(record, "payment")
        original = await conn.fetchrow(
            "SELECT * FROM ledger_transfers WHERE settlement_id = $1 AND code = 1",
            paid.settlement_id,
        )
        await post_again(conn, original)
        doubled = await sc.finish(record)
        assert not doubled.ok and doubled.figures["doubled"] == 1
        assert doubled.figures["ledger_balanced"] is True
        await conn.execute("DELETE FROM ledger_transfers WHERE id = $1", original["id"] + 1)
        await conn.execute(
            "UPDATE ledger_accounts SET debits_posted = debits_posted - $2 WHERE id = $1",
            original["debit_account_id"],
            original["amount"],
        )
        await conn.execute(
            "UPDATE ledger_accounts SET credits_posted = credits_posted - $2 WHERE id = $1",
            original["credit_account_id"],
            original["amount"],
        )
        assert (await sc.finish(record)).ok

        # 2. A lost event: its row deleted.
        other = first(record, "other")
        await conn.execute(
            "DELETE FROM processed_webhooks WHERE provider = $1 AND event_id = $2",
            other.provider,
            other.event_id,
        )
        lost = await sc.finish(record, drain_timeout_s=2)
        assert not lost.ok and lost.figures["lost"] == 1
    finally:
        await conn.close()

    # 3. Messages gone from the stream after their PubAck.
    nc = await nats.connect(nats_node.url)
    try:
        await nc.jetstream().purge_stream("WEBHOOKS")
    finally:
        await nc.close()
    purged = await sc.finish(record, drain_timeout_s=2)
    assert purged.figures["missing_from_stream"] == purged.figures["events_2xx"] - 1

    # 4. A key whose log skips a sequence nobody explains.
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            "INSERT INTO order_log (provider, order_key, key_seq, outcome, event_id)"
            " VALUES ('stripe', 'pi_planted', 2, 'applied', 'evt_planted')"
        )
    finally:
        await conn.close()
    unordered = await sc.finish(record, drain_timeout_s=2, read_stream=False)
    assert unordered.figures["order_violations"] == 1
    assert any(p.startswith("order: stripe pi_planted: ") for p in unordered.problems)


async def post_again(conn: asyncpg.Connection, original: asyncpg.Record) -> None:
    """Post the same transfer under another id, moving both balances (a double posting)."""
    await conn.execute(
        "INSERT INTO ledger_transfers (id, debit_account_id, credit_account_id, amount, ledger,"
        " code, settlement_id, rate_at_payment) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        original["id"] + 1,
        original["debit_account_id"],
        original["credit_account_id"],
        original["amount"],
        original["ledger"],
        original["code"],
        original["settlement_id"],
        Decimal(original["rate_at_payment"]),
    )
    await conn.execute(
        "UPDATE ledger_accounts SET debits_posted = debits_posted + $2 WHERE id = $1",
        original["debit_account_id"],
        original["amount"],
    )
    await conn.execute(
        "UPDATE ledger_accounts SET credits_posted = credits_posted + $2 WHERE id = $1",
        original["credit_account_id"],
        original["amount"],
    )
