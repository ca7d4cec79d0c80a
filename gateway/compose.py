"""The composition root: every client is opened and closed here, in one order.

Used by the Starlette lifespan (`gateway serve`) and by each CLI command, so there are
no module-level clients and no event loop grabbed in a constructor.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import asyncpg

from gateway.adapters.nats import JetStreamBroker
from gateway.adapters.postgres import open_pool
from gateway.adapters.webhook_store import StoredEvent
from gateway.inbox import DirectInbox, GroupCommitInbox
from gateway.metrics import Metrics
from gateway.relay import InlinePublisher, OutboxRelay
from gateway.settings import Settings

log = logging.getLogger("gateway")


@dataclass
class Gateway:
    """The running parts of one gateway process."""

    settings: Settings
    pool: asyncpg.Pool
    broker: JetStreamBroker
    inbox: GroupCommitInbox | DirectInbox
    publisher: InlinePublisher
    relay: OutboxRelay
    metrics: Metrics


@contextlib.asynccontextmanager
async def running_gateway(settings: Settings, *, with_relay: bool = True) -> AsyncIterator[Gateway]:
    """Start the gateway's parts; on exit, stop them so nothing accepted is left behind."""
    metrics = Metrics()
    pool_size = settings.ingest.writers + 8
    async with open_pool(settings.database_url, max_size=pool_size) as pool:
        # 1. NATS in the background: acceptance must not wait for the broker.
        broker = JetStreamBroker(settings.nats)
        await broker.start()
        # 2. The publisher is ready before the inbox can hand it anything.
        publisher = InlinePublisher(pool, broker, settings.outbox, metrics)
        await publisher.start()

        def on_committed(stored: Sequence[StoredEvent]) -> None:
            publisher.submit(stored)

        inbox: GroupCommitInbox | DirectInbox
        if settings.ingest.batching:
            inbox = GroupCommitInbox(pool, settings.ingest, on_committed)
            await inbox.start()
        else:
            inbox = DirectInbox(pool, on_committed, settings.ingest.commit_timeout_s)
        relay = OutboxRelay(pool, broker, settings.outbox, metrics)
        if with_relay:
            await relay.start()
        gateway = Gateway(settings, pool, broker, inbox, publisher, relay, metrics)
        log.info(
            "gateway started",
            extra={"providers": sorted(settings.providers), "services": sorted(settings.services)},
        )
        try:
            yield gateway
        finally:
            # Shutdown, in order: the HTTP server has already stopped taking requests and
            # finished the in-flight ones.
            # 1. Commit whatever is still queued for the idempotency gate.
            await inbox.close()
            # 2. Publish what was committed (anything left is the relay's, next start).
            await publisher.close()
            # 3. Stop sweeping, then let go of NATS and the database.
            await relay.close()
            await broker.close()
            log.info("gateway stopped")
