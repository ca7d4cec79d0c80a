"""The PostgreSQL ledger's two ways of posting a batch agree, and its transfers name
existing accounts (one check per statement, sql/012).

The bulk way sums each account's movements over the batch and writes every balance
once; the careful way inserts and moves each transfer on its own. The same batch must
leave the same results, balances and transfer rows either way.
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from decimal import Decimal

import asyncpg
import pytest

from gateway.adapters.postgres import Conn, open_pool
from gateway.adapters.postgres import ledger as ledger_postgres
from gateway.adapters.postgres.ledger import PostgresLedger
from gateway.core.ledger.ids import clearing_account, merchant_account
from gateway.core.ledger.port import LedgerTransfer, TransferResult
from gateway.core.settlement.instructions import (
    SettlementInstruction,
    SettlementKind,
    build_transfer,
)

RATE = Decimal("1.08")


def _transfers(seed: int, tag: str) -> tuple[list[LedgerTransfer], list[int]]:
    """A mixed batch: captures for a few merchants of two providers, repeats of some,
    refunds (some larger than the merchant holds), and transfers for a merchant with no
    account; the accounts that exist."""
    rng = random.Random(seed)
    merchants = [f"m_{tag}_{i}" for i in range(4)]
    providers = [f"psp_{tag}_a", f"psp_{tag}_b"]

    def transfer(kind: SettlementKind, n: int, merchant: str, amount: int) -> LedgerTransfer:
        instruction = SettlementInstruction(
            settlement_id=f"pi_{tag}_{n}", kind=kind, merchant_id=merchant, amount_minor=amount,
            currency="USD", refund_id=f"re_{n}" if kind is SettlementKind.REFUND else None,
            source_event_id=None,
        )  # fmt: skip
        return build_transfer(instruction, provider=providers[n % 2], ledger_currency="USD",
                              amount_minor=amount, rate_at_payment=RATE)  # fmt: skip

    out: list[LedgerTransfer] = []
    for n in range(120):
        merchant = rng.choice([*merchants, f"m_{tag}_none"])
        kind = SettlementKind.REFUND if rng.random() < 0.2 else SettlementKind.CAPTURE
        amount = rng.randint(1, 5_000) * (20 if kind is SettlementKind.REFUND else 1)
        out.append(transfer(kind, n, merchant, amount))
        if rng.random() < 0.1:
            out.append(out[rng.randrange(len(out))])  # a repeat, inside the batch
    accounts = [clearing_account(p, "USD").id for p in providers]
    accounts += [merchant_account(m, "USD").id for m in merchants]
    return out, accounts


async def _post_one_way(
    conn: Conn, transfers: list[LedgerTransfer], accounts: list[int], *, bulk: bool
) -> tuple[list[TransferResult], list[tuple[int, int, int]], list[tuple[int, ...]]]:
    """Post in a transaction rolled back afterwards; what it answered and left."""
    tx = conn.transaction()
    await tx.start()
    try:
        results = await ledger_postgres._post(conn, transfers, bulk=bulk)
        balances = await conn.fetch(
            "SELECT id, debits_posted, credits_posted FROM ledger_accounts"
            " WHERE id = ANY($1::numeric[]) ORDER BY id",
            [Decimal(a) for a in accounts],
        )
        rows = await conn.fetch(
            "SELECT id, debit_account_id, credit_account_id, amount FROM ledger_transfers"
            " WHERE id = ANY($1::numeric[]) ORDER BY id",
            [Decimal(t.id) for t in transfers],
        )
    finally:
        await tx.rollback()
    return (
        results,
        [(int(r[0]), int(r[1]), int(r[2])) for r in balances],
        [tuple(int(v) for v in r.values()) for r in rows],
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_bulk_and_one_by_one_leave_the_same_ledger(database_url: str, seed: int) -> None:
    tag = uuid.uuid4().hex[:8]
    transfers, accounts = _transfers(seed, tag)
    async with open_pool(database_url, max_size=2) as pool:
        ledger = PostgresLedger(pool)
        providers = {f"psp_{tag}_a", f"psp_{tag}_b"}
        specs = [clearing_account(p, "USD") for p in sorted(providers)]
        # With the debit limit merchant accounts no longer have, so that the batch
        # exercises the refusal for funds on both paths too.
        specs += [
            dataclasses.replace(
                merchant_account(f"m_{tag}_{i}", "USD"), debits_must_not_exceed_credits=True
            )
            for i in range(4)
        ]
        await ledger.ensure_accounts(specs)
        # Some money first, so that some refunds fit and others exceed the credits.
        await ledger.post(transfers[:30])
        batch = transfers[30:]
        async with pool.acquire() as conn:
            bulk = await _post_one_way(conn, batch, accounts, bulk=True)
            careful = await _post_one_way(conn, batch, accounts, bulk=False)
    results = set(bulk[0])
    # The batch exercises every path: new, repeated, refused for funds, missing account.
    assert {
        TransferResult.CREATED,
        TransferResult.EXISTS,
        TransferResult.EXCEEDS_CREDITS,
    } <= results
    assert results & {
        TransferResult.DEBIT_ACCOUNT_NOT_FOUND,
        TransferResult.CREDIT_ACCOUNT_NOT_FOUND,
    }
    assert bulk == careful
    assert sum(d for _, d, _ in bulk[1]) == sum(c for _, _, c in bulk[1])  # balanced


async def test_a_transfer_naming_a_missing_account_is_refused_by_the_table(
    database_url: str,
) -> None:
    """Written behind the ledger's back, the statement-level check still refuses it."""
    transfer_id = random.randrange(1, 2**127)
    clearing = clearing_account(f"psp_{uuid.uuid4().hex[:8]}", "USD")
    merchant = merchant_account(f"m_{uuid.uuid4().hex[:8]}", "USD")
    async with open_pool(database_url, max_size=2) as pool:
        await PostgresLedger(pool).ensure_accounts([clearing])
        insert = (
            "INSERT INTO ledger_transfers (id, debit_account_id, credit_account_id, amount,"
            " ledger, code, settlement_id, rate_at_payment) VALUES ($1, $2, $3, 1, 1, 1, 's', 1)"
        )
        with pytest.raises(asyncpg.ForeignKeyViolationError):
            await pool.execute(insert, transfer_id, clearing.id, merchant.id)
        await PostgresLedger(pool).ensure_accounts([merchant])
        await pool.execute(insert, transfer_id, clearing.id, merchant.id)
        with pytest.raises(asyncpg.ForeignKeyViolationError):
            await pool.execute("DELETE FROM ledger_accounts WHERE id = $1", merchant.id)
        # What else the foreign keys refused: an account's new id, a transfer's new
        # accounts, and emptying the accounts under their transfers.
        other = random.randrange(1, 2**127)
        refused: list[tuple[str, tuple[int, ...]]] = [
            ("UPDATE ledger_accounts SET id = $2 WHERE id = $1", (merchant.id, other)),
            (
                "UPDATE ledger_transfers SET credit_account_id = $2 WHERE id = $1",
                (transfer_id, other),
            ),
            ("TRUNCATE ledger_accounts", ()),
        ]
        for statement, args in refused:
            with pytest.raises(asyncpg.ForeignKeyViolationError):
                await pool.execute(statement, *args)
        await pool.execute(  # the posted totals change, as the ledger changes them
            "UPDATE ledger_accounts SET credits_posted = credits_posted WHERE id = $1",
            merchant.id,
        )
