"""The composition root of `gateway forward` and `gateway listen`: the database pool,
the NATS connection and the destination's consumer, and the HTTP client of its target,
opened and closed in one order around the forwarding loop."""

from __future__ import annotations

import logging
from datetime import datetime

from gateway.adapters.http_target import HttpTarget
from gateway.adapters.jetstream.broker import JetStreamBroker
from gateway.adapters.jetstream.consumer import DurablePullConsumer, forward_consumer_config
from gateway.adapters.postgres import open_pool
from gateway.forward.options import ForwardOptions, Start
from gateway.forward.runner import Forwarder, max_pending
from gateway.forward.view import Counts, View
from gateway.settings import Settings

log = logging.getLogger(__name__)


def consumer_name(options: ForwardOptions) -> str | None:
    """`forward-NAME` for a named destination; None (ephemeral) for an unnamed one."""
    return None if options.name is None else f"forward-{options.name}"


def subjects_of(options: ForwardOptions) -> list[str]:
    """The stream subjects of the destination's providers (all when none are named), so
    the server does not even send what `--provider` would drop."""
    subjects = []
    for provider in sorted(options.filters.providers):
        service = provider.removeprefix("service:")
        subjects.append(f"events.{service}.>" if service != provider else f"webhooks.{provider}.>")
    return subjects


def ack_wait_s(options: ForwardOptions) -> float:
    """Long enough for a message to wait its turn for a slot: every pending message
    could be ahead of it, each taking the timeout, `max_in_flight` at a time."""
    return options.timeout_s * 8 + 30.0


async def run_forward(
    settings: Settings, options: ForwardOptions, view: View, counts: Counts
) -> None:
    """Forward until cancelled, or until the target pauses the destination (410); what
    was done is counted in `counts` as it happens, so a stop by signal still reports it."""
    start_time = datetime.fromisoformat(options.start_time_iso) if options.start_time_iso else None
    async with open_pool(settings.database_url, max_size=4) as pool:
        broker = JetStreamBroker(settings.nats, name="gateway-forward")
        await broker.start()
        target = HttpTarget(
            options.url,
            timeout_s=options.timeout_s,
            verify_tls=options.verify_tls,
            max_connections=options.max_in_flight,
        )
        try:
            consumer = DurablePullConsumer(
                broker,
                settings.nats.stream,
                forward_consumer_config(
                    consumer_name(options),
                    subjects_of(options),
                    from_start=options.start is Start.START,
                    start_time=start_time,
                    ack_wait_s=ack_wait_s(options),
                    max_ack_pending=max_pending(options),
                ),
            )
            await consumer.start()
            log.info(
                "forwarding",
                extra={"destination": options.destination, "consumer": consumer.name},
            )
            forwarder = Forwarder(
                options, consumer, target, pool, view, ack_wait_s=ack_wait_s(options), counts=counts
            )
            await forwarder.run()
        finally:
            await target.close()
            await broker.close()
