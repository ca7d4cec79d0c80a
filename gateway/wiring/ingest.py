"""The composition root of `gateway serve` and `gateway relay`: every client is opened
and closed here, in one order.

The Starlette lifespan runs `running_gateway`, so there are no module-level clients and
no event loop grabbed in a constructor.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import AsyncIterator

import httpx

from gateway import logs, tracing
from gateway import settings as settings_mod
from gateway.adapters.alert_webhook import AlertWebhook
from gateway.adapters.jetstream.broker import JetStreamBroker
from gateway.adapters.postgres import DatabaseProbe, open_pool
from gateway.backfill.task import ScheduledBackfill, scheduled
from gateway.core.retention import key_horizon_warning
from gateway.dependency_watch import DependencyWatch, process_name
from gateway.dlq.alerts import run_alerts
from gateway.ingest.app import GatewayApp
from gateway.ingest.inbox import DirectInbox, GroupCommitInbox, OnCommitted
from gateway.ingest.parts import Inbox, IngestParts
from gateway.ingest.relay import OutboxRelay
from gateway.ingest.remembered_keys import RecordedKeys, RememberingInbox
from gateway.metrics import ListenAddress, Metrics, metrics_listener
from gateway.metrics.loop_lag import watch_loop_lag
from gateway.retention.task import RetentionTask
from gateway.settings import RETRY_HORIZON_S, Settings
from gateway.wiring import collector
from gateway.wiring.backfill import scheduled_parts
from gateway.wiring.certificates import certificate_stores
from gateway.wiring.durability import (
    DatabaseReadiness,
    check_required_durability,
    watching_durability,
)

log = logging.getLogger(__name__)


def _left_to_relay() -> None:
    """Committed rows need nothing more here: a `gateway relay` process publishes them."""


@contextlib.asynccontextmanager
async def running_gateway(
    settings: Settings, *, own_process: bool = False
) -> AsyncIterator[IngestParts]:
    """Start the gateway's parts; on exit, stop them so nothing accepted is left behind.

    With `[outbox] inline = false` nothing is published from here: the relay only keeps
    the outbox gauges (`gateway relay` processes publish). `own_process`: the process
    serves nothing else (`gateway serve`), so its cycle collector is tuned for it.
    """
    inline = settings.outbox.inline
    metrics = Metrics()
    pool_size = settings.ingest.writers + 8
    async with (
        # 0. Traces first and flushed last, so every span of the run is exported.
        tracing.configured(settings.tracing, "gateway-serve"),
        open_pool(settings.database_url, max_size=pool_size) as pool,
        # 1. The database's durability: read once (a warning, or with
        # `require_synchronous_standby` a refusal), then every 30 s.
        watching_durability(pool, metrics, settings) as durability,
        httpx.AsyncClient() as http_client,  # the alert webhook's
        contextlib.AsyncExitStack() as exits,
    ):
        # 2. NATS in the background: acceptance must not wait for the broker.
        broker = JetStreamBroker(settings.nats)
        await broker.start()
        # 3. The relay, woken by every commit; without inline publishing, committed rows
        # wait for a `gateway relay` process.
        watch = DependencyWatch(metrics, process_name("serve")) if inline else None
        relay = OutboxRelay(pool, broker, settings.outbox, metrics, path="inline", watch=watch)
        on_committed: OnCommitted = relay.wake if inline else _left_to_relay
        gate: Inbox
        if settings.ingest.batching:
            group_commit = GroupCommitInbox(pool, settings.ingest, on_committed)
            await group_commit.start()
            gate = group_commit
        else:
            gate = DirectInbox(pool, on_committed)
        keys = RecordedKeys(settings.ingest.remembered_keys)
        inbox = RememberingInbox(gate, keys, metrics.duplicates_from_memory_total)
        await relay.start(sweep=inline)  # without sweeping it still keeps the gauges fresh
        # DLQ gauges and the in-process alerts (thresholds every interval, once per episode).
        receiver = None
        if settings.alerts.webhook_url:
            receiver = AlertWebhook(
                http_client, settings.alerts.webhook_url, settings.alerts.timeout_s
            )
        alerts = asyncio.create_task(
            run_alerts(pool, settings.alerts, metrics, receiver), name="dlq-alerts"
        )
        # Retention and the storage gauges: every process tries, one works (advisory lock).
        warning = key_horizon_warning(settings.retention.key_max_age_s, RETRY_HORIZON_S)
        if warning:
            log.warning(warning)
        retention = RetentionTask(pool, settings.retention, metrics)
        retention.start()
        # Scheduled backfill, per provider with [providers.X.backfill]: every process
        # tries, one works (advisory lock).
        backfills = ScheduledBackfill(
            pool, scheduled(settings.providers), scheduled_parts(settings, pool, metrics)
        )
        backfills.start()
        database = DatabaseReadiness(DatabaseProbe(pool), durability)
        # The signing certificates of the providers that sign with one (PayPal): a
        # client each, closed with the others below.
        certificates = await certificate_stores(settings, exits)
        parts = IngestParts(
            settings.http,
            settings.ingest,
            settings.tracing,
            inbox,
            database,
            broker,
            metrics,
            certificates,
        )
        if own_process:
            # Before the first request: a pass of the cycle collector over every module
            # imported at start-up stalls every request in flight (26-38 ms, every three
            # seconds of the first load after start, while the heap still grows).
            collector.settle_down()
        loop_lag = asyncio.create_task(
            watch_loop_lag(metrics.event_loop_lag_seconds.observe), name="loop-lag"
        )
        log.info(
            "gateway started",
            extra={"providers": sorted(settings.providers), "services": sorted(settings.services)},
        )
        try:
            yield parts
        finally:
            # Shutdown, in order: the HTTP server has already stopped taking requests and
            # finished the in-flight ones.
            # 1. Commit whatever is still queued for the idempotency gate.
            await inbox.close()
            # 2. Publish what was committed (anything left is the next relay's).
            await relay.close()
            if inline:
                await relay.drain(settings.ingest.commit_timeout_s)
            # 3. Stop backfill, alerting and retention (a batch in progress rolls back; a
            # backfill pass continues from its cursor next time), then let go of NATS,
            # the durability check and the database.
            await backfills.close()
            await retention.close()
            for task in (alerts, loop_lag):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await broker.close()
            metrics.close()  # with `--workers N`: this worker's gauges leave the figures
            log.info("gateway stopped")


@contextlib.asynccontextmanager
async def running_relay(settings: Settings, metrics: Metrics) -> AsyncIterator[OutboxRelay]:
    """`gateway relay`: only the database, NATS and the outbox sweep.

    Any number may run: they share the one outbox cursor, one sweeping at a time.
    """
    # With `require_synchronous_standby`, refused before NATS is opened (and nothing said
    # otherwise): the reading that may warn comes after NATS, so a stream that differs
    # from the configuration stops start-up with its one line and no warning beside it.
    await check_required_durability(settings)
    async with (
        tracing.configured(settings.tracing, "gateway-relay"),
        open_pool(settings.database_url, max_size=4) as pool,
    ):
        broker = JetStreamBroker(settings.nats, name="gateway-relay")
        await broker.start()
        try:
            async with watching_durability(pool, metrics, settings):
                watch = DependencyWatch(metrics, process_name("relay"))
                relay = OutboxRelay(pool, broker, settings.outbox, metrics, watch=watch)
                await relay.start()
                try:
                    yield relay
                finally:
                    await relay.close()
        finally:
            await broker.close()


def relay_metrics_address(settings: Settings) -> ListenAddress:
    """Where `gateway relay` serves /metrics, from `[outbox]`."""
    outbox = settings.outbox
    return ListenAddress(
        outbox.relay_metrics_host, outbox.relay_metrics_port, "outbox.relay_metrics_port"
    )


async def run_relay(settings: Settings, listen: ListenAddress | None = None) -> None:
    """`gateway relay`: its /metrics listener (bound first, so a port already taken stops
    start-up at once) and the relay, until cancelled."""
    metrics = Metrics()
    async with (
        metrics_listener(metrics, listen or relay_metrics_address(settings)),
        running_relay(settings, metrics),
    ):
        await asyncio.Event().wait()


def create_app(settings: Settings, *, own_process: bool = False) -> GatewayApp:
    """The application; its lifespan runs the whole gateway (`running_gateway`).
    `own_process`: the process serves this application alone (`gateway serve`)."""
    if own_process:
        return GatewayApp(settings, functools.partial(running_gateway, own_process=True))
    return GatewayApp(settings, running_gateway)


def app_from_env() -> GatewayApp:
    """Factory for `uvicorn --factory` and multi-worker serving: config from the environment.

    Worker processes start fresh, so they set up the JSON logs themselves.
    """
    logs.configure(os.environ.get("GATEWAY_LOG_LEVEL", "INFO"))
    return create_app(settings_mod.load(os.environ.get(settings_mod.CONFIG_ENV)), own_process=True)
