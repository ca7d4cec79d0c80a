"""The log lines of settling: one debug line per posted settlement, one info line per
batch posted together (one line per event cost about a tenth of the worker's CPU at
full speed)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from decimal import Decimal

from gateway import tracing
from gateway.core.ledger.port import TransferResult
from gateway.core.settlement.instructions import SettlementInstruction
from gateway.settlement.items import Posted

log = logging.getLogger(__name__)


def log_settled(
    instruction: SettlementInstruction,
    amount_minor: int,
    currency: str,
    rate: Decimal,
    result: TransferResult,
) -> None:
    """The debug line of one posted settlement (each batch logs `log_posted`)."""
    log.debug(
        "settled",
        extra={
            "settlement_id": instruction.settlement_id,
            "kind": instruction.kind.value,
            "amount_minor": amount_minor,
            "currency": currency,
            "rate": str(rate),
            "result": result.value,
        },
    )


def log_posted(posted: Sequence[Posted], created: int, currency: str) -> None:
    """The log line of a batch posted together: how many transfers it created, how many
    were in the ledger already, and the first and last settlement (a batch of one names
    its settlement, as the per-event debug line does)."""
    first, last = posted[0][0].priced.item, posted[-1][0].priced.item
    fields = {
        "transfers": len(posted),
        "transfers_created": created,
        "transfers_existed": len(posted) - created,
        "currency": currency,
        "settlement_id": first.instruction.settlement_id,
        "last_settlement_id": last.instruction.settlement_id,
    }
    # Alone, the line carries the event's trace id, as the per-event line did.
    with tracing.activated(first.span if len(posted) == 1 else None):
        log.info("settled", extra=fields)
