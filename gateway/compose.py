"""The composition root: every client is opened and closed here, in one order.

Used by the Starlette lifespan (`gateway serve`) and by each CLI command, so there are
no module-level clients and no event loop grabbed in a constructor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import asyncpg
import httpx
import redis.asyncio as aioredis

from gateway.adapters.currency import CurrencyClient, RateCache, RateSource
from gateway.adapters.ledger_postgres import PostgresLedger
from gateway.adapters.nats import JetStreamBroker
from gateway.adapters.postgres import open_pool
from gateway.adapters.webhook_store import StoredEvent
from gateway.alerts import run_alerts
from gateway.core.alerting import parse_alert_settings
from gateway.core.ledger import Ledger
from gateway.core.retry import RetryPolicy
from gateway.inbox import DirectInbox, GroupCommitInbox, Inbox, OnCommitted
from gateway.metrics import Metrics
from gateway.recorded_keys import RecordedKeys, RememberingInbox
from gateway.relay import InlinePublisher, OutboxRelay
from gateway.settings import Settings
from gateway.settler import Settler

log = logging.getLogger("gateway")


@dataclass
class Gateway:
    """The running parts of one gateway process."""

    settings: Settings
    pool: asyncpg.Pool
    broker: JetStreamBroker
    inbox: RememberingInbox
    publisher: InlinePublisher | None  # None with `[outbox] inline = false`
    relay: OutboxRelay
    metrics: Metrics


def _left_to_relay(stored: Sequence[StoredEvent]) -> None:
    """Committed rows need nothing more here: a `gateway relay` process publishes them."""


@contextlib.asynccontextmanager
async def running_gateway(settings: Settings) -> AsyncIterator[Gateway]:
    """Start the gateway's parts; on exit, stop them so nothing accepted is left behind.

    With `[outbox] inline = false` nothing is published from here: there is no inline
    publisher and the relay does not sweep (`gateway relay` processes do both).
    """
    inline = settings.outbox.inline
    metrics = Metrics()
    parse_alert_settings(settings.raw)  # a bad [alerts] table stops start-up, not a task
    pool_size = settings.ingest.writers + 8
    async with open_pool(settings.database_url, max_size=pool_size) as pool:
        # 1. NATS in the background: acceptance must not wait for the broker.
        broker = JetStreamBroker(settings.nats)
        await broker.start()
        # 2. The inline publisher is ready before the inbox can hand it anything; without
        # one, committed rows wait for a `gateway relay` process.
        publisher = InlinePublisher(pool, broker, settings.outbox, metrics) if inline else None
        on_committed: OnCommitted = _left_to_relay
        if publisher is not None:
            await publisher.start()
            on_committed = publisher.submit
        gate: Inbox
        if settings.ingest.batching:
            group_commit = GroupCommitInbox(pool, settings.ingest, on_committed)
            await group_commit.start()
            gate = group_commit
        else:
            gate = DirectInbox(pool, on_committed)
        keys = RecordedKeys(settings.ingest.remembered_keys)
        inbox = RememberingInbox(gate, keys, metrics.duplicates_from_memory_total)
        relay = OutboxRelay(pool, broker, settings.outbox, metrics, inline=publisher)
        await relay.start(sweep=inline)  # without sweeping it still keeps the gauges fresh
        # DLQ gauges and the in-process alerts (thresholds every interval, once per episode).
        alerts = asyncio.create_task(run_alerts(pool, settings, metrics), name="dlq-alerts")
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
            if publisher is not None:
                await publisher.close()
            # 3. Stop sweeping and alerting, then let go of NATS and the database.
            alerts.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await alerts
            await relay.close()
            await broker.close()
            log.info("gateway stopped")


@contextlib.asynccontextmanager
async def running_relay(settings: Settings, metrics: Metrics) -> AsyncIterator[OutboxRelay]:
    """`gateway relay`: only the database, NATS and the outbox sweep.

    With `[outbox] inline = false` nobody else publishes, so rows are taken as soon as
    they are committed rather than after `relay_after_s`.
    """
    async with open_pool(settings.database_url, max_size=4) as pool:
        broker = JetStreamBroker(settings.nats, name="gateway-relay")
        await broker.start()
        relay = OutboxRelay(pool, broker, settings.outbox, metrics)
        await relay.start()
        try:
            yield relay
        finally:
            await relay.close()
            await broker.close()


@dataclass
class SettlementParts:
    """What the settlement worker (and DLQ replay of settlement rows) needs."""

    settings: Settings
    pool: asyncpg.Pool
    broker: JetStreamBroker
    ledger: Ledger
    settler: Settler
    metrics: Metrics


@contextlib.asynccontextmanager
async def open_ledger(settings: Settings, pool: asyncpg.Pool) -> AsyncIterator[Ledger]:
    """The configured ledger backend for the block's lifetime."""
    if settings.ledger.backend == "tigerbeetle":
        from gateway.adapters.ledger_tigerbeetle import open_tigerbeetle

        async with open_tigerbeetle(
            settings.ledger.cluster_id,
            ",".join(settings.ledger.addresses),
            timeout_s=settings.ledger.timeout_s,
        ) as ledger:
            yield ledger
    else:
        yield PostgresLedger(pool)


#: The settlement tables grow from empty under a steady load, and their batch look-ups
#: (`= ANY($1)` over an array of ids) are prepared once per connection: a generic plan
#: made while a table was small scans it in full for ever after (measured: 160 ms per
#: look-up at 50,000 rows instead of 1 ms). Planning each execution for its own
#: arguments costs a fraction of a millisecond and always finds the unique index.
SETTLEMENT_SESSION = {"plan_cache_mode": "force_custom_plan"}


@contextlib.asynccontextmanager
async def settlement_parts(
    settings: Settings, metrics: Metrics | None = None
) -> AsyncIterator[SettlementParts]:
    """Open the database, NATS, the ledger, Redis and the currency-service client."""
    metrics = metrics or Metrics()
    pool_size = settings.settlement.concurrency + 4
    async with (
        open_pool(
            settings.database_url, max_size=pool_size, server_settings=SETTLEMENT_SESSION
        ) as pool,
        open_ledger(settings, pool) as ledger,
        httpx.AsyncClient() as http_client,
    ):
        redis_client = aioredis.from_url(
            settings.redis_url, socket_connect_timeout=0.5, socket_timeout=0.5
        )
        broker = JetStreamBroker(settings.nats, name="gateway-settle")
        await broker.start()
        try:
            rates = RateSource(
                CurrencyClient(
                    http_client, settings.currency.url, timeout_s=settings.currency.timeout_s
                ),
                RateCache(redis_client, key_prefix=settings.currency.cache_key_prefix),
                max_age_s=settings.currency.max_age_s,
                policy=RetryPolicy(settings.currency.retry_delays_s),
            )
            settler = Settler(settings, pool, ledger, rates)
            yield SettlementParts(settings, pool, broker, ledger, settler, metrics)
        finally:
            await broker.close()
            await redis_client.aclose()
