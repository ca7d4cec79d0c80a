"""The composition root of the operator commands (`dlq`, `ledger`, `sign --send`): each
opens what it needs here, for the length of one command, so the CLI itself never opens
a connection.

The settlement side (ledger, Redis, currency client) is imported where a command first
needs it: `gateway serve` parses the same CLI, which imports this module, and must not
load it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from gateway import tracing
from gateway.adapters.jetstream.broker import JetStreamBroker
from gateway.adapters.postgres import Pool, connection, open_pool
from gateway.adapters.postgres.dead_letters import rows as dead_letters
from gateway.adapters.postgres.dead_letters.bodies import bodies_of
from gateway.adapters.webhook_sender import post_webhook
from gateway.core.dlq.columns import AMOUNT_BODY_MAX_BYTES, Amount, amount_of
from gateway.core.dlq.filters import DlqFilter
from gateway.core.dlq.model import DlqRow, DlqStats, RowBrief
from gateway.metrics import Metrics
from gateway.settings import Settings

if TYPE_CHECKING:
    from gateway.core.ledger.accounts import AccountNames
    from gateway.core.ledger.port import Ledger
    from gateway.settlement.parts import SettlementParts


@contextlib.asynccontextmanager
async def database(settings: Settings, max_size: int = 2) -> AsyncIterator[Pool]:
    """A small pool for one command."""
    async with open_pool(settings.database_url, max_size=max_size) as pool:
        yield pool


@contextlib.asynccontextmanager
async def ledger(settings: Settings) -> AsyncIterator[tuple[Ledger, AccountNames]]:
    """The configured ledger, and the directory of its account names (both backends keep
    the names in the gateway's database, where the PostgreSQL ledger lives too)."""
    from gateway.adapters.postgres.account_names import PostgresAccountNames
    from gateway.wiring.settlement import open_ledger

    async with database(settings) as pool, open_ledger(settings, pool) as opened:
        yield opened, PostgresAccountNames(pool)


@contextlib.asynccontextmanager
async def books(settings: Settings) -> AsyncIterator[tuple[Pool, Ledger]]:
    """The gateway's database and the configured ledger, for finance's commands
    (`gateway ledger statement|transfers|export|adjust|check --payments`)."""
    from gateway.wiring.settlement import open_ledger

    async with database(settings) as pool, open_ledger(settings, pool) as opened:
        yield pool, opened


class ReplayResources:
    """What `gateway dlq replay` gives its stage handlers (`gateway.dlq.parts.ReplayContext`).

    The pool is the command's. NATS and the settlement parts are opened on the first call,
    so a run that replays no row of a stage never connects to what that stage needs, and
    are closed by `replay_resources` when the command ends. `run-jobs` builds handlers
    from two tasks (its jobs and the automatic re-drive), so first use takes a lock.
    """

    def __init__(
        self,
        settings: Settings,
        pool: Pool,
        metrics: Metrics,
        opened: contextlib.AsyncExitStack,
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.metrics = metrics
        self._opened = opened
        self._broker: JetStreamBroker | None = None
        self._settlement: SettlementParts | None = None
        self._first_use = asyncio.Lock()

    async def broker(self) -> JetStreamBroker:
        """A JetStream connection of the run's own (the `ingest` handler publishes on it)."""
        async with self._first_use:
            if self._broker is None:
                broker = JetStreamBroker(self.settings.nats, name="gateway-dlq-replay")
                self._opened.push_async_callback(broker.close)
                await broker.start()
                self._broker = broker
            return self._broker

    async def settlement(self) -> SettlementParts:
        """The live settlement path's parts (the `settlement` handler settles with them)."""
        async with self._first_use:
            if self._settlement is None:
                from gateway.wiring.settlement import settlement_parts

                parts = settlement_parts(self.settings, self.metrics)
                self._settlement = await self._opened.enter_async_context(parts)
            return self._settlement


@contextlib.asynccontextmanager
async def replay_resources(settings: Settings) -> AsyncIterator[ReplayResources]:
    """The pool of one replay command, and whatever its handlers open on the way.

    Closing order: what the handlers opened, in reverse, then the command's pool, then
    the traces (flushed last, so every row's span is exported).
    """
    async with (
        tracing.configured(settings.tracing, "gateway-dlq-replay"),
        database(settings, max_size=4) as pool,
        contextlib.AsyncExitStack() as opened,
    ):
        yield ReplayResources(settings, pool, Metrics(), opened)


# --- one short connection per inspecting command ---------------------------------------


async def dead_letter_rows(
    settings: Settings, f: DlqFilter, limit: int
) -> tuple[list[RowBrief], int]:
    """`dlq list`: the matching rows, oldest failure first, and how many match in all."""
    async with database(settings) as pool, connection(pool) as conn:
        return await dead_letters.list_rows(conn, f, limit)


async def dead_letter_list(
    settings: Settings, f: DlqFilter, limit: int
) -> tuple[list[RowBrief], int, dict[int, Amount | None]]:
    """`dlq list`: the rows, how many match, and each row's amount, read from its body
    (up to `AMOUNT_BODY_MAX_BYTES`) as the settlement worker reads it."""
    async with database(settings) as pool, connection(pool) as conn:
        rows, total = await dead_letters.list_rows(conn, f, limit)
        bodies = await bodies_of(conn, [r.id for r in rows], AMOUNT_BODY_MAX_BYTES)
    schemes = {name: p.scheme for name, p in settings.providers.items()}
    merchants = {n: p.merchant for n, p in settings.providers.items() if p.merchant is not None}
    amounts = {
        row_id: amount_of(b.provider, b.event_type, b.body, schemes, merchants)
        for row_id, b in bodies.items()
    }
    return rows, total, amounts


async def dead_letter(settings: Settings, row_id: int) -> DlqRow | None:
    """`dlq show`: one row, or None when there is no such row."""
    async with database(settings) as pool, connection(pool) as conn:
        return await dead_letters.get_row(conn, row_id)


async def resolve_dead_letter(
    settings: Settings, row_id: int, note: str, user: str | None
) -> tuple[bool, DlqRow | None]:
    """`dlq resolve`: whether this call resolved the row, and the row as it now is."""
    async with database(settings) as pool, connection(pool) as conn:
        done = await dead_letters.resolve_by_hand(conn, row_id, note, user)
        return done, await dead_letters.get_row(conn, row_id)


async def dead_letter_stats(settings: Settings, now: datetime) -> DlqStats:
    """`dlq stats`: the table's health at `now`."""
    async with database(settings) as pool, connection(pool) as conn:
        return await dead_letters.stats(conn, now)


def post_signed(url: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, str]:
    """`gateway sign --send`: one POST, as the provider would send it; (status, text)."""
    return post_webhook(url, body, headers)
