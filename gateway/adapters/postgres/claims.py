"""The `payment_claims` table: each payment's follow-ups, netted by `core.settlement.follow_ups`.

Read and written inside the caller's transaction, after `lock_payments` has taken each
payment's advisory lock, so the claims read are all the claims there are until the
transaction ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from gateway.adapters.postgres import Conn, translate_errors
from gateway.core.settlement.follow_ups import Claim
from gateway.core.settlement.instructions import SettlementKind

# One lock space for payments: the text is hashed to the 64-bit key the lock takes.
_LOCK = """
SELECT pg_advisory_xact_lock(hashtextextended('gateway.payment:' || p, 0))
FROM unnest($1::text[]) AS p ORDER BY p"""

_SELECT = """
SELECT settlement_id, kind, claim_key, amount_minor, currency, cumulative, due_minor,
       ledger_due_minor
FROM payment_claims WHERE settlement_id = ANY($1::text[]) AND kind = ANY($2::text[])
ORDER BY created_at, claim_key"""

_INSERT = """
INSERT INTO payment_claims (settlement_id, kind, claim_key, amount_minor, currency, cumulative,
                            due_minor, ledger_due_minor, transfer_id, provider, source_event_id,
                            fx_minor, current_rate)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[],
                     $6::boolean[], $7::bigint[], $8::bigint[], $9::text[]::numeric[],
                     $10::text[], $11::text[], $12::bigint[], $13::text[]::numeric[])"""


@dataclass(frozen=True)
class NewClaim:
    """A claim to record, with its transfer's id (posted only when it moves money)."""

    settlement_id: str
    claim: Claim
    transfer_id: int
    provider: str
    source_event_id: str | None


async def lock_payments(conn: Conn, settlement_ids: Sequence[str]) -> None:
    """Take each payment's advisory lock until the transaction ends, in a fixed order
    (two transactions never wait on each other in a cycle)."""
    with translate_errors():
        await conn.execute(_LOCK, sorted(set(settlement_ids)))


async def claims_of(
    conn: Conn, settlement_ids: Sequence[str], kinds: Iterable[SettlementKind]
) -> dict[str, list[Claim]]:
    """Each payment's recorded claims of these kinds, oldest first."""
    found: dict[str, list[Claim]] = {p: [] for p in settlement_ids}
    with translate_errors():
        rows = await conn.fetch(_SELECT, list(set(settlement_ids)), [k.value for k in kinds])
    for r in rows:
        found[r["settlement_id"]].append(
            Claim(
                kind=SettlementKind(r["kind"]),
                key=r["claim_key"],
                amount_minor=r["amount_minor"],
                currency=r["currency"],
                cumulative=r["cumulative"],
                due_minor=r["due_minor"],
                ledger_due_minor=r["ledger_due_minor"],
            )
        )
    return found


async def record(conn: Conn, new: Sequence[NewClaim]) -> None:
    """Insert the claims (each is new: the caller holds its payment's lock)."""
    if not new:
        return
    columns: list[list[object]] = [[] for _ in range(13)]
    for n in new:
        c = n.claim
        rate = None if c.current_rate is None else str(c.current_rate)
        values = (n.settlement_id, c.kind.value, c.key, c.amount_minor, c.currency,
                  c.cumulative, c.due_minor, c.ledger_due_minor, str(n.transfer_id),
                  n.provider, n.source_event_id, c.fx_minor, rate)  # fmt: skip
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    with translate_errors():
        await conn.execute(_INSERT, *columns)


async def netted(conn: Conn, transfer_ids: Sequence[int]) -> set[int]:
    """Those of `transfer_ids` whose movement was recorded and netted to nothing (no
    transfer to wait for: an event `gateway reconcile` must not publish again)."""
    if not transfer_ids:
        return set()
    with translate_errors():
        rows = await conn.fetch(
            "SELECT transfer_id::text AS t FROM payment_claims"
            " WHERE transfer_id = ANY($1::text[]::numeric[]) AND ledger_due_minor = 0",
            [str(t) for t in transfer_ids],
        )
    return {int(r["t"]) for r in rows}


@dataclass(frozen=True)
class Claimed:
    """What a recorded claim said (its own amount, or the running total), and the
    exchange difference fixed with it."""

    amount_minor: int
    fx_minor: int = 0
    current_rate: Decimal | None = None


async def claimed(conn: Conn, transfer_ids: Sequence[int]) -> dict[int, Claimed]:
    """What each of `transfer_ids`' claims said, by transfer id: a repeat of a movement
    must say the same, and a retry posts the same exchange difference."""
    if not transfer_ids:
        return {}
    with translate_errors():
        rows = await conn.fetch(
            "SELECT transfer_id::text AS t, amount_minor, fx_minor,"
            " current_rate::text AS current_rate FROM payment_claims"
            " WHERE transfer_id = ANY($1::text[]::numeric[])",
            [str(t) for t in transfer_ids],
        )
    return {
        int(r["t"]): Claimed(
            r["amount_minor"],
            r["fx_minor"],
            None if r["current_rate"] is None else Decimal(r["current_rate"]),
        )
        for r in rows
    }
