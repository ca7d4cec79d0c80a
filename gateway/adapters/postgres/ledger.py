"""The embedded ledger: double-entry accounts and transfers in PostgreSQL.

Same semantics and result codes as TigerBeetle (see `core.ledger.port`), so `make run` can
settle with no extra server and one contract suite covers both backends. A batch is one
transaction: its accounts are locked with `SELECT ... FOR UPDATE` in id order (so two
batches never wait on each other in a cycle), every transfer is checked against the
locked balances (`core.ledger.rules`), the accepted ones are inserted with one statement,
and the balances are written back before the commit. A whole batch costs about as many
round trips as a single transfer, which is what lets the worker post a fetch at a time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

import asyncpg

from gateway.adapters.postgres import Conn, Pool, connection, transaction, translate_errors
from gateway.core.ledger.ids import settlement_ref
from gateway.core.ledger.port import (
    ID_BURNING_RESULTS,
    AccountSpec,
    Balance,
    LedgerTotals,
    LedgerTransfer,
    PostedTransfer,
    TransferPhase,
    TransferResult,
)
from gateway.core.ledger.rules import (
    AccountState,
    Resolved,
    TransferFields,
    apply_transfer,
    compare,
    decide,
    transfer_fields,
)
from gateway.errors import (
    DatabaseUnavailable,
    LedgerBatchRaced,
    LedgerIdCollision,
    LedgerUnavailable,
)

_INSERT_ACCOUNT = """
    INSERT INTO ledger_accounts
        (id, ledger, code, debits_must_not_exceed_credits, credits_must_not_exceed_debits)
    VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (id) DO NOTHING"""
_SELECT_ACCOUNT = """
    SELECT id, ledger, code, debits_must_not_exceed_credits, credits_must_not_exceed_debits
    FROM ledger_accounts WHERE id = $1"""
_LOCK_ACCOUNTS = """
    SELECT id::text AS id, ledger, debits_must_not_exceed_credits,
           credits_must_not_exceed_debits, debits_posted::text AS debits_posted,
           credits_posted::text AS credits_posted, debits_pending::text AS debits_pending,
           credits_pending::text AS credits_pending
    FROM ledger_accounts WHERE id = ANY($1::text[]::numeric[])
    ORDER BY id FOR UPDATE"""
_SELECT_TRANSFERS = """
    SELECT id, debit_account_id, credit_account_id, amount, ledger, code, settlement_id,
           rate_at_payment, phase, pending_id
    FROM ledger_transfers WHERE id = ANY($1::text[]::numeric[])"""
# What a batch's ids already mean, in one round trip: its posted transfers (`failed`
# false) and its burnt ids (`failed` true, the other columns null).
_SELECT_TAKEN = """
    SELECT false AS failed, id::text AS id, debit_account_id::text AS debit_account_id,
           credit_account_id::text AS credit_account_id, amount::text AS amount, ledger,
           code, settlement_id, rate_at_payment::text AS rate_at_payment, phase,
           pending_id::text AS pending_id
    FROM ledger_transfers WHERE id = ANY($1::text[]::numeric[])
    UNION ALL
    SELECT true, id::text, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
    FROM ledger_failed_transfers WHERE id = ANY($1::text[]::numeric[])"""
# The pending transfers a batch's posts and voids name, and how each was resolved.
_SELECT_PENDING = """
    SELECT p.id::text AS id, p.debit_account_id::text AS debit_account_id,
           p.credit_account_id::text AS credit_account_id, p.amount::text AS amount,
           p.ledger, p.code, p.settlement_id, p.rate_at_payment::text AS rate_at_payment,
           p.phase, p.pending_id::text AS pending_id, r.phase AS resolved
    FROM ledger_transfers p LEFT JOIN ledger_transfers r ON r.pending_id = p.id
    WHERE p.id = ANY($1::text[]::numeric[])"""
_INSERT_TRANSFER = """
    INSERT INTO ledger_transfers
        (id, debit_account_id, credit_account_id, amount, ledger, code, settlement_id,
         rate_at_payment, phase, pending_id)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, nullif($10::numeric, 0))
    ON CONFLICT (id) DO NOTHING RETURNING id"""
# A batch's new transfers in one statement (see `_post`).
_INSERT_TRANSFERS = """
    INSERT INTO ledger_transfers
        (id, debit_account_id, credit_account_id, amount, ledger, code, settlement_id,
         rate_at_payment, phase, pending_id)
    SELECT id, debit, credit, amount, ledger, code, settlement, rate, phase, nullif(pending, 0)
    FROM unnest($1::text[]::numeric[], $2::text[]::numeric[], $3::text[]::numeric[],
                $4::text[]::numeric[], $5::bigint[], $6::integer[], $7::text[],
                $8::text[]::numeric[], $9::text[], $10::text[]::numeric[])
         AS u(id, debit, credit, amount, ledger, code, settlement, rate, phase, pending)
    ON CONFLICT (id) DO NOTHING RETURNING 1"""
_UPDATE_TOTALS = """
    UPDATE ledger_accounts AS a
    SET debits_posted = u.debits, credits_posted = u.credits,
        debits_pending = u.debits_pending, credits_pending = u.credits_pending
    FROM unnest($1::text[]::numeric[], $2::text[]::numeric[], $3::text[]::numeric[],
                $4::text[]::numeric[], $5::text[]::numeric[])
         AS u(id, debits, credits, debits_pending, credits_pending)
    WHERE a.id = u.id"""
_SELECT_BALANCES = """
    SELECT id, ledger, code, debits_posted, credits_posted, debits_pending, credits_pending
    FROM ledger_accounts"""
_BURN_ID = """
    INSERT INTO ledger_failed_transfers (id, result) VALUES ($1, $2)
    ON CONFLICT (id) DO NOTHING RETURNING id"""


def _row_fields(row: asyncpg.Record) -> TransferFields:
    return (
        int(row["debit_account_id"]),
        int(row["credit_account_id"]),
        int(row["amount"]),
        int(row["ledger"]),
        int(row["code"]),
        str(row["settlement_id"]),
        Decimal(row["rate_at_payment"]),
        str(row["phase"]),
        int(row["pending_id"] or 0),
    )


@contextlib.contextmanager
def _ledger_errors() -> Iterator[None]:
    """The database's translation, with "unreachable" reported as the ledger's, so it is
    retried on the ledger's schedule (2 s, 10 s, 60 s) and alerts when exhausted."""
    try:
        with translate_errors():
            yield
    except DatabaseUnavailable as exc:
        raise LedgerUnavailable(f"PostgreSQL ledger unreachable: {exc}") from exc


class PostgresLedger:
    """The `Ledger` port on PostgreSQL tables `ledger_accounts` and `ledger_transfers`."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def ensure_accounts(self, accounts: Sequence[AccountSpec]) -> None:
        """Create missing accounts; an existing id with other fields is a collision."""
        with _ledger_errors():
            async with transaction(self._pool) as conn:
                for spec in sorted(accounts, key=lambda a: a.id):
                    wanted = (
                        spec.id,
                        spec.ledger,
                        int(spec.code),
                        spec.debits_must_not_exceed_credits,
                        spec.credits_must_not_exceed_debits,
                    )
                    await conn.execute(_INSERT_ACCOUNT, *wanted)
                    row = await conn.fetchrow(_SELECT_ACCOUNT, spec.id)
                    # Inserted just now or before: either way it must be this account.
                    found = None if row is None else tuple(row.values())
                    if found != wanted:
                        raise LedgerIdCollision(
                            f"account {spec.id:#034x} exists with different fields"
                        )

    async def post(self, transfers: Sequence[LedgerTransfer]) -> list[TransferResult]:
        """Post a batch in one transaction; one result per transfer, in order."""
        if not transfers:
            return []
        with _ledger_errors():
            if len(transfers) > 1:
                try:
                    async with transaction(self._pool) as conn:
                        return await _post(conn, transfers, bulk=True)
                except LedgerBatchRaced:
                    pass  # rolled back whole; the careful way below sorts the race out
            async with transaction(self._pool) as conn:
                return await _post(conn, transfers, bulk=False)

    async def lookup_transfers(self, transfer_ids: Sequence[int]) -> list[PostedTransfer | None]:
        """The transfers with these ids, in the same order; None where there is none."""
        with _ledger_errors():
            async with connection(self._pool) as conn:
                rows = await conn.fetch(_SELECT_TRANSFERS, [str(i) for i in transfer_ids])
        found = {int(r["id"]): _posted(r) for r in rows}
        return [found.get(i) for i in transfer_ids]

    async def balance(self, account_id: int) -> Balance | None:
        """The account's posted totals, or None if it does not exist."""
        with _ledger_errors():
            async with connection(self._pool) as conn:
                row = await conn.fetchrow(
                    _SELECT_BALANCES + " WHERE id = $1",
                    account_id,
                )
        return None if row is None else _balance(row)

    async def balances(self) -> list[Balance]:
        """Every account's posted totals, by id."""
        with _ledger_errors():
            async with connection(self._pool) as conn:
                rows = await conn.fetch(_SELECT_BALANCES + " ORDER BY id")
        return [_balance(r) for r in rows]

    async def check(self) -> LedgerTotals:
        """Sums of posted debits and credits over every account."""
        with _ledger_errors():
            async with connection(self._pool) as conn:
                row = await conn.fetchrow(
                    "SELECT coalesce(sum(debits_posted), 0) AS debits,"
                    " coalesce(sum(credits_posted), 0) AS credits FROM ledger_accounts"
                )
        if row is None:  # an aggregate always returns a row; keep the type checker honest
            return LedgerTotals(0, 0)
        return LedgerTotals(debits_posted=int(row["debits"]), credits_posted=int(row["credits"]))


async def _post(
    conn: Conn, transfers: Sequence[LedgerTransfer], *, bulk: bool
) -> list[TransferResult]:
    """Check and post `transfers` inside the caller's transaction.

    `bulk` inserts every accepted transfer with one statement after the checks; should
    one of them turn out to exist after all (committed concurrently, with other
    accounts, since ours are locked), it raises `LedgerBatchRaced` for the caller to roll back and
    post again with `bulk=False`, which inserts one by one and answers for each.
    """
    # 1. Lock every account of the batch in id order. Everything read after this sees
    #    what concurrent posters to these accounts committed before us.
    account_ids = sorted({a for t in transfers for a in (t.debit_account_id, t.credit_account_id)})
    accounts = {
        int(r["id"]): AccountState(
            ledger=int(r["ledger"]),
            debits_limited=r["debits_must_not_exceed_credits"],
            credits_limited=r["credits_must_not_exceed_debits"],
            debits_posted=int(r["debits_posted"]),
            credits_posted=int(r["credits_posted"]),
            debits_pending=int(r["debits_pending"]),
            credits_pending=int(r["credits_pending"]),
        )
        for r in await conn.fetch(_LOCK_ACCOUNTS, [str(a) for a in account_ids])
    }
    # 2. What the batch's ids already mean: posted transfers and burnt ids.
    existing: dict[int, TransferFields] = {}
    failed: set[int] = set()
    for r in await conn.fetch(_SELECT_TAKEN, [str(t.id) for t in transfers]):
        if r["failed"]:
            failed.add(int(r["id"]))
        else:
            existing[int(r["id"])] = _row_fields(r)
    resolved: Resolved = {}
    pending_ids = [str(t.pending_id) for t in transfers if t.phase.resolves]
    if pending_ids:  # read under the locks of their accounts, which are the posts' own
        for r in await conn.fetch(_SELECT_PENDING, pending_ids):
            existing.setdefault(int(r["id"]), _row_fields(r))
            if r["resolved"] is not None:
                resolved[int(r["id"])] = TransferPhase(r["resolved"])
    # 3. Decide and apply each transfer in order, as TigerBeetle does.
    results: list[TransferResult] = []
    created: list[LedgerTransfer] = []
    for t in transfers:
        result = decide(t, accounts, existing, failed, resolved)
        if result is TransferResult.CREATED:
            if bulk:
                apply_transfer(t, accounts, existing, resolved)
                created.append(t)
            else:
                result = await _insert(conn, t, accounts, existing, resolved)
        elif result in ID_BURNING_RESULTS:
            failed.add(t.id)
            if await conn.fetchval(_BURN_ID, t.id, result.value) is None:
                result = TransferResult.ID_ALREADY_FAILED  # a concurrent batch burnt it first
        results.append(result)
    if created:
        columns = list(zip(*(_bulk_params(t) for t in created), strict=True))
        inserted = await conn.fetch(_INSERT_TRANSFERS, *map(list, columns))
        if len(inserted) != len(created):
            raise LedgerBatchRaced()
    # 4. Write the new totals of every account that moved.
    touched = [
        (str(i), str(a.debits_posted), str(a.credits_posted), str(a.debits_pending),
         str(a.credits_pending))
        for i, a in accounts.items()
        if a.touched
    ]  # fmt: skip
    if touched:
        await conn.execute(_UPDATE_TOTALS, *map(list, zip(*touched, strict=True)))
    return results


async def _insert(
    conn: Conn,
    t: LedgerTransfer,
    accounts: dict[int, AccountState],
    existing: dict[int, TransferFields],
    resolved: Resolved,
) -> TransferResult:
    """Insert a transfer that passed every check, and move the locked balances."""
    inserted = await conn.fetchval(_INSERT_TRANSFER, *_row_params(t))
    if inserted is None:
        # A concurrent batch on other accounts committed this id after our look-up.
        rows = await conn.fetch(_SELECT_TRANSFERS, [str(t.id)])
        existing[t.id] = _row_fields(rows[0])
        return compare(t, existing[t.id])
    apply_transfer(t, accounts, existing, resolved)
    return TransferResult.CREATED


def _row_params(t: LedgerTransfer) -> tuple[Any, ...]:
    return (t.id, *transfer_fields(t))


def _bulk_params(t: LedgerTransfer) -> tuple[Any, ...]:
    # numeric(39,0) values go as text: asyncpg's binary numeric encoding costs several
    # microseconds a value, a batch's worth of them more than its round trips.
    return (str(t.id), str(t.debit_account_id), str(t.credit_account_id), str(t.amount_minor),
            t.ledger, int(t.code), t.settlement_id, str(t.rate_at_payment), t.phase.value,
            str(t.pending_id))  # fmt: skip


def _posted(row: asyncpg.Record) -> PostedTransfer:
    """A transfer as stored, as TigerBeetle answers it: the settlement as its hash."""
    debit, credit, amount, ledger, code, settlement_id, rate, phase, pending = _row_fields(row)
    return PostedTransfer(int(row["id"]), debit, credit, amount, ledger, code,
                          settlement_ref(settlement_id), rate, TransferPhase(phase),
                          pending)  # fmt: skip


def _balance(row: asyncpg.Record) -> Balance:
    return Balance(
        int(row["id"]),
        int(row["debits_posted"]),
        int(row["credits_posted"]),
        ledger=int(row["ledger"]),
        code=int(row["code"]),
        debits_pending=int(row["debits_pending"]),
        credits_pending=int(row["credits_pending"]),
    )
