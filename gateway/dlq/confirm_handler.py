"""Replaying `confirm` dead letters: the webhook was recorded, but the fetch that
confirms it was refused or kept failing. Replaying owes the fetch again, from its first
try; `gateway confirm` makes it on its next round.

Nothing is fetched from here: the confirm stage owns fetching, paced per provider. If
the API still refuses, the fetch is parked again with a new dead letter.
"""

from __future__ import annotations

from gateway.adapters.postgres import Pool, connection
from gateway.adapters.postgres.confirmations import rearm
from gateway.core.dlq.model import DlqRow
from gateway.dlq.parts import ReplayContext, StageHandler
from gateway.errors import EventNotRecorded


class ConfirmReplay:
    """Owes a parked fetch again (the `confirm` stage)."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def __call__(self, row: DlqRow) -> None:
        async with connection(self._pool) as conn:
            owed = await rearm(conn, row.provider, row.event_id)
        if not owed:
            raise EventNotRecorded(
                f"no fetch is recorded for {row.provider}/{row.event_id} (retention removed it?)"
            )


async def confirm_handler(ctx: ReplayContext) -> StageHandler:
    """Build the `confirm` handler; it needs only the database."""
    return ConfirmReplay(ctx.pool)
