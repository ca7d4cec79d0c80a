"""DLQ replay of `stage = 'settlement'` rows: the live path's `Settler`, so a replayed
event goes through exactly the same idempotency as one from the stream, and through
the same ordering gate: an ordered event settles only in its key's turn."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from gateway.adapters.postgres import Conn, connection, transaction
from gateway.adapters.postgres.ordering import applied as order_store
from gateway.adapters.postgres.ordering import key_moves as moves
from gateway.adapters.postgres.webhooks import event_type_of
from gateway.core.dlq.model import DlqRow
from gateway.core.events.model import Event
from gateway.dlq.parts import ReplayContext, StageHandler
from gateway.errors import OrderPredecessorMissing, PayloadInvalid
from gateway.settlement.items import Item
from gateway.settlement.parts import SettlementParts
from gateway.settlement.settler import SettleOutcome
from gateway.settlement.steps import WithSettled

log = logging.getLogger(__name__)


async def settlement_handler(ctx: ReplayContext) -> StageHandler:
    """Build the `settlement` handler on the run's settlement parts (opened on first use)."""
    parts = await ctx.settlement()
    await parts.settler.open_clearing_accounts()
    ordered = ctx.settings.ordering.enabled

    async def replay_settlement(row: DlqRow) -> None:
        event_type = None
        place = None
        async with connection(ctx.pool) as conn:
            if row.webhook_id is not None:
                event_type = await event_type_of(conn, row.webhook_id)
            if ordered:
                place = await order_store.place_of(conn, row.id)
        event = Event(
            provider=row.provider,
            event_id=row.event_id,
            event_type=event_type,
            subject=row.subject,
            headers={},
            body=row.payload,
            received_at=row.received_at,
            order_key=None if place is None else place[0],
            key_seq=None if place is None else place[1],
        )
        if place is None:
            outcome = await _settle(parts, event)
        else:
            outcome = await _settle_in_turn(parts, ctx, event, *place)
        log.info("settlement replayed", extra={"dlq_id": row.id, "outcome": outcome.value})

    return replay_settlement


async def _settle(
    parts: SettlementParts, event: Event, with_settled: WithSettled | None = None
) -> SettleOutcome:
    # Attempt 1: a rate that is not to be had now fails this replay (recorded by the
    # replayer) instead of waiting out the currency schedule inside the command.
    outcome = await parts.settler.settle(event, attempt=1, with_settled=with_settled)
    if outcome is SettleOutcome.IGNORED:
        # It failed in settlement before; "nothing to settle" now means the event or
        # the configuration changed under it, which an operator must look at.
        raise PayloadInvalid(
            f"event type {event.event_type!r} from {event.provider} does not settle"
        )
    return outcome


async def _settle_in_turn(
    parts: SettlementParts, ctx: ReplayContext, event: Event, order_key: str, seq: int
) -> SettleOutcome:
    """At or below the key's position: settle (idempotent), closing an open deferral.
    Its turn: settle and move the key (releasing a hold on it) in one transaction. After
    a gap: raise, so the row stays parked until the events before it are in."""
    key = (event.provider, order_key)
    async with connection(ctx.pool) as conn:
        state = (await order_store.states(conn, [key]))[key]
    if seq > state.applied_seq + 1:
        raise OrderPredecessorMissing(
            f"waits for seq {state.applied_seq + 1} of its key (it is seq {seq})"
        )
    step = moves.Advance(event.provider, order_key, seq, "applied", event.event_id)
    if seq <= state.applied_seq:
        closed: list[Item] = []

        async def close(conn: Conn, items: Sequence[Item]) -> None:
            # In the transaction marking it settled: a number still owed its settlement
            # (deferred, skipped) is closed with it, or not at all.
            await order_store.resolve_deferral(conn, event.provider, order_key, seq, "settled")
            closed.extend(items)

        outcome = await _settle(parts, event, close)
        if not closed:  # settled before (a duplicate): nothing was marked, so close it now
            async with connection(ctx.pool) as conn:
                await order_store.resolve_deferral(conn, event.provider, order_key, seq, "settled")
        return outcome
    posted: list[Item] = []

    async def with_settled(conn: Conn, items: Sequence[Item]) -> None:
        await moves.advance(conn, [step])  # in the transaction marking it settled
        posted.extend(items)

    outcome = await _settle(parts, event, with_settled)
    if not posted:  # settled before (a duplicate): nothing was marked, so move it now
        async with transaction(ctx.pool) as conn:
            await moves.advance(conn, [step])
    return outcome
