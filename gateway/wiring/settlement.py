"""The composition root of `gateway settle` (and of what replays settlement rows):
the database, NATS, the ledger, Redis and the HTTP client of the currency-service and the
alert webhook, opened and closed in one order; and of `gateway reconcile`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

import httpx

from gateway import tracing
from gateway.adapters.alert_webhook import AlertWebhook
from gateway.adapters.currency import NoRateCache, RateCache, RateSource
from gateway.adapters.jetstream.broker import JetStreamBroker
from gateway.adapters.jetstream.consumer import DurablePullConsumer, consumer_config
from gateway.adapters.jetstream.one_shot import open_one_shot_publisher
from gateway.adapters.postgres import open_pool
from gateway.adapters.redis_client import open_redis
from gateway.core.failures.retry import RetryPolicy
from gateway.core.health.readiness import Dependency
from gateway.dependency_watch import DependencyWatch, flushing, process_name
from gateway.dlq.alerts import run_alerts
from gateway.metrics import ListenAddress, Metrics, metrics_listener
from gateway.settings import Settings
from gateway.settlement.parts import ReconcileParts, SettlementParts
from gateway.settlement.reconcile import (
    DEFAULT_LOOKBACK_S,
    DEFAULT_OLDER_THAN_S,
    ReconcileReport,
    reconcile,
)
from gateway.settlement.settler import Settler
from gateway.settlement.worker import SettlementWorker
from gateway.wiring import collector, health
from gateway.wiring.durability import check_required_durability, watching_durability
from gateway.wiring.ledger import open_ledger as open_ledger  # where it was first
from gateway.wiring.watched_currency import WatchedCurrencyClient

log = logging.getLogger(__name__)


#: The settlement tables grow from empty under a steady load, and their batch look-ups
#: (`= ANY($1)` over an array of ids) are prepared once per connection: a generic plan
#: made while a table was small scans it in full for ever after (measured: 160 ms per
#: look-up at 50,000 rows instead of 1 ms). Planning each execution for its own
#: arguments costs a fraction of a millisecond and always finds the unique index.
SETTLEMENT_SESSION = {"plan_cache_mode": "force_custom_plan"}


@contextlib.asynccontextmanager
async def rate_cache(settings: Settings) -> AsyncIterator[RateCache | NoRateCache]:
    """The Redis rate cache, or none without `[redis] url` (Redis is optional)."""
    if not settings.redis_url:
        yield NoRateCache()
        return
    async with open_redis(settings.redis_url, timeout_s=0.5) as redis_client:
        yield RateCache(redis_client, key_prefix=settings.currency.cache_key_prefix)


@contextlib.asynccontextmanager
async def settlement_parts(
    settings: Settings, metrics: Metrics | None = None
) -> AsyncIterator[SettlementParts]:
    """Open the database, NATS, the ledger, Redis and the HTTP client."""
    metrics = metrics or Metrics()
    pool_size = settings.settlement.concurrency + 4
    async with (
        open_pool(
            settings.database_url, max_size=pool_size, server_settings=SETTLEMENT_SESSION
        ) as pool,
        open_ledger(settings, pool) as ledger,
        httpx.AsyncClient() as http_client,
        rate_cache(settings) as cache,
    ):
        broker = JetStreamBroker(settings.nats, name="gateway-settle")
        await broker.start()
        if not settings.redis_url:  # said once the stream was found usable
            log.warning(
                "no rate cache: redis.url (or GATEWAY_REDIS_URL) is not set; every rate "
                "comes from the currency-service"
            )
        try:
            # What this process sees of its dependencies, written for the console.
            watch = DependencyWatch(metrics, process_name("settle"))
            rates = RateSource(
                WatchedCurrencyClient(
                    watch, http_client, settings.currency.url, timeout_s=settings.currency.timeout_s
                ),
                cache,
                max_age_s=settings.currency.max_age_s,
                policy=RetryPolicy(settings.currency.retry_delays_s),
            )
            settler = Settler(
                settings.settlement, settings.providers, settings.services, pool, ledger, rates
            )
            consumer = DurablePullConsumer(
                broker, settings.nats.stream, consumer_config(settings.settlement)
            )
            alerts = None
            if settings.alerts.webhook_url:
                alerts = AlertWebhook(
                    http_client, settings.alerts.webhook_url, timeout_s=settings.alerts.timeout_s
                )
            async with flushing(watch, pool):
                yield SettlementParts(
                    settings,
                    pool,
                    broker,
                    ledger,
                    settler,
                    metrics,
                    consumer=consumer,
                    alerts=alerts,
                    watch=watch,
                )
        finally:
            await broker.close()


def settle_metrics_address(settings: Settings) -> ListenAddress:
    """Where `gateway settle` serves /metrics, from `[settlement]`."""
    section = settings.settlement
    return ListenAddress(section.metrics_host, section.metrics_port, "settlement.metrics_port")


async def run_settlement(settings: Settings, listen: ListenAddress | None = None) -> None:
    """`gateway settle`: the worker, its listener (/metrics, /livez, /readyz) and the
    alert evaluation.

    The listener is bound first, so a port already taken stops start-up at once.
    """
    metrics = Metrics()
    readiness = health.Health()
    async with (
        metrics_listener(metrics, listen or settle_metrics_address(settings), readiness),
        tracing.configured(settings.tracing, "gateway-settle"),  # flushed after the worker
    ):
        # With `require_synchronous_standby`, refused before NATS or the ledger is opened.
        await check_required_durability(settings)
        await _settle(settings, metrics, readiness)


async def _settle(settings: Settings, metrics: Metrics, readiness: health.Health) -> None:
    """The worker and the alert evaluation over the settlement parts, until cancelled."""
    async with (
        settlement_parts(settings, metrics) as parts,
        # Read once (a warning, or a refusal when required), then every 30 s.
        watching_durability(parts.pool, parts.metrics, settings),
        httpx.AsyncClient() as probe_http,  # /readyz's own: never queued behind rates
    ):
        # /readyz asks what the worker cannot settle without: the currency-service is
        # among them even with a rate cache, which serves only rates it already holds.
        probes = {
            Dependency.DATABASE: health.database(parts.pool),
            Dependency.NATS: health.nats(parts.broker),
            Dependency.LEDGER: health.ledger(parts.ledger),
            Dependency.CURRENCY_SERVICE: health.currency_service(probe_http, settings.currency.url),
        }
        try:
            await _work(settings, parts, lambda: readiness.watch(probes))
        finally:
            readiness.forget()  # before the parts it asks are closed


async def _work(settings: Settings, parts: SettlementParts, ready: Callable[[], None]) -> None:
    """The worker, with the alert evaluation beside it; `ready` once it has started."""

    def started() -> None:
        collector.settle_down()
        # Ready once the worker consumes (its consumer and clearing accounts are
        # there): a start-up that fails before it is never reported ready.
        ready()

    # Retries are counted here, so their alert threshold is judged here too; the
    # shared alert state keeps serve and settle from announcing an episode twice.
    alerts = asyncio.create_task(
        run_alerts(parts.pool, settings.alerts, parts.metrics, parts.alerts)
    )
    try:
        await SettlementWorker(parts).run(started=started)
    finally:
        alerts.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await alerts


@contextlib.asynccontextmanager
async def reconcile_parts(settings: Settings) -> AsyncIterator[ReconcileParts]:
    """A small pool and a NATS publisher of its own for one reconciliation pass.

    Neither connects yet: the pool opens connections on first use, and the publisher
    connects only if the pass has something to re-publish.
    """
    async with (
        open_pool(settings.database_url, max_size=2) as pool,
        open_one_shot_publisher(settings.nats, name="gateway-reconcile") as publisher,
    ):
        yield ReconcileParts(settings.providers, settings.settlement, pool, publisher)


async def run_reconcile(
    settings: Settings,
    *,
    older_than_s: float = DEFAULT_OLDER_THAN_S,
    lookback_s: float = DEFAULT_LOOKBACK_S,
    batch_size: int = 500,
    dry_run: bool = False,
    run_id: str | None = None,
) -> ReconcileReport:
    """`gateway reconcile`: one pass against the configured database and stream."""
    async with reconcile_parts(settings) as parts:
        return await reconcile(
            parts,
            older_than_s=older_than_s,
            lookback_s=lookback_s,
            batch_size=batch_size,
            dry_run=dry_run,
            run_id=run_id,
        )
