"""The composition root of `gateway forward` and `gateway listen`: the database pool,
the NATS connection and the destination's consumer, and the HTTP client of its target,
opened and closed in one order around the forwarding loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from datetime import UTC, datetime

from gateway.adapters.http_target import HttpTarget, refuse_private
from gateway.adapters.jetstream.broker import JetStreamBroker
from gateway.adapters.jetstream.consumer import DurablePullConsumer, forward_consumer_config
from gateway.adapters.jetstream.consumer_info import consumer_backlog
from gateway.adapters.postgres import Pool, open_pool, transaction
from gateway.adapters.postgres.dead_letters.rows import resolve_stage
from gateway.core.events.model import FORWARD_STAGE_PREFIX, sender_subjects
from gateway.core.health.readiness import Dependency
from gateway.errors import ConfigError, GatewayError
from gateway.forward.runner import Forwarder, max_pending
from gateway.forward.view import Counts, View
from gateway.metrics import ListenAddress, Metrics, metrics_listener
from gateway.settings import Settings
from gateway.settings.forward import ForwardOptions, Start
from gateway.wiring import health

log = logging.getLogger(__name__)


def consumer_name(options: ForwardOptions) -> str | None:
    """`forward-NAME` for a named destination; None (ephemeral) for an unnamed one."""
    return None if options.name is None else f"forward-{options.name}"


def subjects_of(options: ForwardOptions) -> list[str]:
    """The stream subjects of the destination's providers (all when none are named), so
    the server does not even send what `--provider` would drop."""
    return [sender_subjects(p) for p in sorted(options.filters.providers)]


#: The stream's limit on a destination's unacknowledged messages. A message nak'd with
#: a delay counts towards it while it waits (hours, on the standard schedule), so it is
#: far above what the forwarder holds in memory: a failing key must not stop the others.
MAX_ACK_PENDING = 20_000


def ack_wait_s(options: ForwardOptions) -> float:
    """Long enough for a message to wait its turn for a slot: every message held in
    memory could be ahead of it, each taking the timeout, `max_in_flight` at a time.
    (Messages waiting behind their key are also reported in progress as they wait.)"""
    rounds = -(-max_pending(options) // options.max_in_flight)
    return options.timeout_s * (rounds + 1) + 5.0


#: How often the destination's backlog is read for its gauges.
BACKLOG_EVERY_S = 15.0


def check_target(options: ForwardOptions) -> None:
    """A destination declared in the configuration may not reach a private, loopback,
    link-local or metadata address unless it says `allow_private = true`."""
    if options.allow_private:
        return
    try:
        refuse_private(options.url)
    except ValueError as exc:
        raise ConfigError(f"forward.{options.destination}.url", str(exc)) from None


async def run_forward(
    settings: Settings,
    options: ForwardOptions,
    view: View,
    counts: Counts,
    on_ready: Callable[[], None] = lambda: None,
    *,
    rand: Callable[[], float] = random.random,
) -> None:
    """Forward until cancelled, or until the target pauses the destination (410); what
    was done is counted in `counts` as it happens, so a stop by signal still reports it.
    A destination with a metrics port serves `/metrics`, `/livez` and `/readyz` there
    meanwhile."""
    check_target(options)
    metrics = Metrics()
    address = ListenAddress(
        options.metrics_host, options.metrics_port, f"forward.{options.destination}.metrics_port"
    )
    readiness = health.Health()
    async with metrics_listener(metrics, address, readiness):
        await _forward(settings, options, view, counts, metrics, on_ready, rand, readiness)


async def _forward(
    settings: Settings,
    options: ForwardOptions,
    view: View,
    counts: Counts,
    metrics: Metrics,
    on_ready: Callable[[], None],
    rand: Callable[[], float],
    readiness: health.Health,
) -> None:
    start_time = datetime.fromisoformat(options.start_time_iso) if options.start_time_iso else None
    async with open_pool(settings.database_url, max_size=4) as pool:
        broker = JetStreamBroker(settings.nats, name="gateway-forward")
        await broker.start()
        target = HttpTarget(
            options.url,
            timeout_s=options.timeout_s,
            verify_tls=options.verify_tls,
            max_connections=options.max_in_flight,
            allow_private=options.allow_private,
        )
        backlog: asyncio.Task[None] | None = None
        try:
            subjects = subjects_of(options)
            consumer = DurablePullConsumer(
                broker,
                settings.nats.stream,
                forward_consumer_config(
                    consumer_name(options),
                    subjects,
                    from_start=options.start is Start.START,
                    start_time=start_time,
                    ack_wait_s=ack_wait_s(options),
                    max_ack_pending=MAX_ACK_PENDING,
                ),
            )
            await consumer.start()
            on_ready()  # bound: from here on, every accepted event reaches this forwarder
            # /readyz: what a forwarder cannot work without (the target is not among
            # them: a target that is down is what the retries and dead letters are for).
            readiness.watch(
                {Dependency.DATABASE: health.database(pool), Dependency.NATS: health.nats(broker)}
            )
            log.info(
                "forwarding",
                extra={"destination": options.destination, "consumer": consumer.name},
            )
            if options.metrics_port:
                backlog = asyncio.create_task(
                    _read_backlog(
                        broker, settings.nats.stream, consumer.name, subjects, options, metrics
                    )
                )
            forwarder = Forwarder(
                options,
                consumer,
                target,
                pool,
                view,
                ack_wait_s=ack_wait_s(options),
                database_url=settings.database_url,
                counts=counts,
                metrics=metrics,
                gap_s=settings.ordering.gap_timeout_s,
                rand=rand,
            )
            await forwarder.run()
        finally:
            readiness.forget()
            if options.name is None:
                counts.resolved = await _resolve_run(pool, options)
            if backlog is not None:
                backlog.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await backlog
            await target.close()
            await broker.close()


#: How long an ending run may take to resolve its dead letters before it gives up.
RESOLVE_TIMEOUT_S = 5.0


async def _resolve_run(pool: Pool, options: ForwardOptions) -> int:
    """Resolve the dead letters of a run without `--name` as it ends: they are filed
    under this run's own destination (`listen-RUN`), which no later run takes, so
    nothing could ever replay them, and a developer's failed deliveries must not stay
    open beside production's. A database that does not answer leaves them open: the
    stop is never held up, and the warning says how to close them."""
    stage = f"{FORWARD_STAGE_PREFIX}{options.destination}"
    note = "the run stopped: a run without --name cannot be replayed into"
    try:
        async with asyncio.timeout(RESOLVE_TIMEOUT_S), transaction(pool) as conn:
            return await resolve_stage(conn, stage, note, f"gateway:{options.destination}")
    except (GatewayError, TimeoutError) as exc:
        log.warning(
            "dead letters of this run left open",
            extra={"stage": stage, "error_class": type(exc).__name__},
        )
        return 0


async def _read_backlog(
    broker: JetStreamBroker,
    stream: str,
    consumer: str,
    subjects: list[str],
    options: ForwardOptions,
    metrics: Metrics,
) -> None:
    """Every `BACKLOG_EVERY_S`, the destination's lag and the age of its oldest
    undelivered event, into their gauges (left as they were while NATS cannot say)."""
    destination = options.destination
    while True:
        found = await consumer_backlog(broker, stream, consumer, subjects=tuple(subjects))
        if found.pending is not None:
            metrics.forward_lag.set(
                found.pending + (found.ack_pending or 0), destination=destination
            )
            age_s = 0.0
            if found.oldest_at is not None:
                age_s = max(0.0, (datetime.now(UTC) - found.oldest_at).total_seconds())
            metrics.forward_oldest_undelivered_seconds.set(age_s, destination=destination)
        await asyncio.sleep(BACKLOG_EVERY_S)
