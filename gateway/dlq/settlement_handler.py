"""DLQ replay of `stage = 'settlement'` rows: the live path's `Settler`, so a replayed
event goes through exactly the same idempotency as one from the stream."""

from __future__ import annotations

import logging

from gateway.adapters.postgres import connection
from gateway.compose.settlement import settlement_parts
from gateway.core.dlq_model import DlqRow
from gateway.core.model import Event, Stage
from gateway.dlq.replay import ReplayContext, StageHandler, register_stage_handler_factory
from gateway.errors import PayloadInvalid
from gateway.settlement.settler import SettleOutcome

log = logging.getLogger("gateway.settlement.worker")


async def _settlement_replay_handler(ctx: ReplayContext) -> StageHandler:
    """Replay of `stage = 'settlement'` rows: the live path's `Settler`, same idempotency."""
    parts = await ctx.resources.enter_async_context(settlement_parts(ctx.settings, ctx.metrics))
    await parts.settler.open_clearing_accounts()

    async def replay_settlement(row: DlqRow) -> None:
        event_type = None
        if row.webhook_id is not None:
            async with connection(ctx.pool) as conn:
                event_type = await conn.fetchval(
                    "SELECT event_type FROM processed_webhooks WHERE id = $1", row.webhook_id
                )
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


register_stage_handler_factory(Stage.SETTLEMENT.value, _settlement_replay_handler)
