"""Opening the configured ledger, for every process that posts or reads it: `gateway
settle`, the finance commands, and the console's ledger pages (which must not load the
rest of the settlement side to get it)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from gateway.adapters.postgres import Pool
from gateway.adapters.postgres.ledger import PostgresLedger
from gateway.core.ledger.port import Ledger
from gateway.settings import Settings


@contextlib.asynccontextmanager
async def open_ledger(settings: Settings, pool: Pool) -> AsyncIterator[Ledger]:
    """The configured ledger backend for the block's lifetime."""
    if settings.ledger.backend == "tigerbeetle":
        from gateway.adapters.tigerbeetle import open_tigerbeetle

        async with open_tigerbeetle(
            settings.ledger.cluster_id,
            ",".join(settings.ledger.addresses),
            timeout_s=settings.ledger.timeout_s,
        ) as ledger:
            yield ledger
    else:
        yield PostgresLedger(pool)
