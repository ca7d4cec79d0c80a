"""The composition root of the operator commands (`dlq`, `ledger`, `reconcile`): each
opens what it needs here, for the length of one command."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from gateway.adapters.postgres import Pool, open_pool
from gateway.compose.settlement import open_ledger
from gateway.core.ledger import Ledger
from gateway.settings import Settings


@contextlib.asynccontextmanager
async def database(settings: Settings, max_size: int = 2) -> AsyncIterator[Pool]:
    """A small pool for one command."""
    async with open_pool(settings.database_url, max_size=max_size) as pool:
        yield pool


@contextlib.asynccontextmanager
async def ledger(settings: Settings) -> AsyncIterator[Ledger]:
    """The configured ledger (and the database the PostgreSQL ledger lives in)."""
    async with database(settings) as pool, open_ledger(settings, pool) as opened:
        yield opened
