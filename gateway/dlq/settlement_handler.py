"""DLQ replay of `stage = 'settlement'` rows: the live path's `Settler`, so a replayed
event goes through exactly the same idempotency as one from the stream."""

from __future__ import annotations

import logging

from gateway.adapters.postgres import connection
from gateway.adapters.postgres.webhooks import event_type_of
from gateway.core.dlq_model import DlqRow
from gateway.core.model import Event
from gateway.dlq.parts import ReplayContext, StageHandler
from gateway.errors import PayloadInvalid
from gateway.settlement.settler import SettleOutcome

log = logging.getLogger(__name__)


async def settlement_handler(ctx: ReplayContext) -> StageHandler:
    """Build the `settlement` handler on the run's settlement parts (opened on first use)."""
    parts = await ctx.settlement()
    await parts.settler.open_clearing_accounts()

    async def replay_settlement(row: DlqRow) -> None:
        event_type = None
        if row.webhook_id is not None:
            async with connection(ctx.pool) as conn:
                event_type = await event_type_of(conn, row.webhook_id)
        event = Event(
            provider=row.provider,
            event_id=row.event_id,
            event_type=event_type,
            subject=row.subject,
            headers={},
            body=row.payload,
            received_at=row.received_at,
        )
        # Attempt 1: a rate that is not to be had now fails this replay (recorded by the
        # replayer) instead of waiting out the currency schedule inside the command.
        outcome = await parts.settler.settle(event, attempt=1)
        if outcome is SettleOutcome.IGNORED:
            # It failed in settlement before; "nothing to settle" now means the event or
            # the configuration changed under it, which an operator must look at.
            raise PayloadInvalid(f"event type {event_type!r} from {row.provider} does not settle")
        log.info("settlement replayed", extra={"dlq_id": row.id, "outcome": outcome.value})

    return replay_settlement
