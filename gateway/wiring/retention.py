"""The composition root of `gateway retention run`: one small pool for one pass."""

from __future__ import annotations

from gateway.adapters.postgres import open_pool
from gateway.core.retention import RetentionReport
from gateway.retention.passes import RetentionPass
from gateway.settings import Settings


async def run_retention(settings: Settings, *, dry_run: bool = False) -> RetentionReport:
    """One pass against the configured database (skipped if another process holds the
    retention lock)."""
    async with open_pool(settings.database_url, max_size=1) as pool:
        return await RetentionPass(pool, settings.retention).run(dry_run=dry_run)
