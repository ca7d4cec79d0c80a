"""`gateway ledger check --payments`: every recorded movement against the ledger's
transfer, and the payments where they differ.

Walks `settlements` in keyset pages (`core.finance.statements.PAGE_ROWS` rows, one
`lookup_transfers` call each), so it runs in bounded memory over millions of rows on
either ledger; only the payments that differ are kept. A row differs when it is settled
and its transfer is missing or moved another amount, or when it is pending or failed and
its transfer is in the ledger all the same (a crash between posting and marking, which
the event's redelivery mends). A payment's net (captures - refunds - chargebacks +
reversals +/- adjustments) is the sum of its rows, recorded and posted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.adapters.postgres import Pool, connection
from gateway.adapters.postgres import statements as statements_store
from gateway.core.finance.statements import PAGE_ROWS
from gateway.core.ledger.port import Ledger


@dataclass
class PaymentDifference:
    """A payment whose recorded net differs from what its transfers moved."""

    payment_id: str
    recorded_minor: int = 0  # the net of its settled rows
    posted_minor: int = 0  # the net of the transfers the ledger holds for its rows
    notes: list[str] = field(default_factory=list)


@dataclass
class PaymentCheck:
    """What the check saw: rows and payments walked, and the payments that differ."""

    rows: int = 0
    differing: dict[str, PaymentDifference] = field(default_factory=dict)


async def check_payments(pool: Pool, ledger: Ledger, page_rows: int = PAGE_ROWS) -> PaymentCheck:
    """Compare every recorded movement with its transfer; the payments that differ."""
    result = PaymentCheck()
    after = 0
    while True:
        async with connection(pool) as conn:
            rows = await statements_store.settled_page(conn, after, page_rows)
        if not rows:
            return result
        found = await ledger.lookup_transfers([r.transfer_id for r in rows])
        for r, transfer in zip(rows, found, strict=True):
            result.rows += 1
            settled = r.state == "settled"
            recorded = r.signed_minor if settled else 0
            posted = 0 if transfer is None else r.kind.balance_sign * transfer.amount_minor
            if recorded == posted:
                continue
            diff = result.differing.setdefault(r.payment_id, PaymentDifference(r.payment_id))
            diff.recorded_minor += recorded
            diff.posted_minor += posted
            what = f"{r.kind.value} row {r.id}"
            if transfer is None:
                diff.notes.append(f"{what}: settled, no transfer in the ledger")
            elif not settled:
                diff.notes.append(f"{what}: {r.state}, yet posted")
            else:
                diff.notes.append(f"{what}: recorded {recorded}, posted {posted}")
        after = rows[-1].id
