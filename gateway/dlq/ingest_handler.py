"""Replaying `ingest` dead letters: a verified webhook whose payload failed validation is
validated again with the provider's current configuration and, if it now passes, handed
to the outbox like any accepted event.

The typical causes: an operator fixed `event_type_from` for an `hmac` provider, or the
validation code was fixed after a provider sent something it did not expect.
"""

from __future__ import annotations

import dataclasses
import logging

from gateway.adapters.jetstream.broker import JetStreamBroker
from gateway.adapters.postgres import Pool, transaction
from gateway.adapters.postgres.confirmations import rearm, recorded_as
from gateway.adapters.postgres.dead_letters.rows import OutboxState, queue_for_outbox
from gateway.adapters.postgres.ordering.key_numbers import lock_keys, number_row
from gateway.adapters.postgres.webhooks import StoredEvent
from gateway.core.bodies.content import DIGEST_ID_PREFIX
from gateway.core.confirm.events import Shaping, confirmed_events
from gateway.core.dlq.model import DlqRow
from gateway.core.events.model import Event, Failure, Source, webhook_event
from gateway.core.providers import get_provider, get_scheme
from gateway.core.providers.base import Confirmation, Confirmed, Decode
from gateway.dlq.parts import ReplayContext, StageHandler
from gateway.errors import (
    ErrorClass,
    EventIdChanged,
    EventNotRecorded,
    GatewayError,
    ProviderNotConfigured,
    StillInvalid,
)
from gateway.ingest.endpoints import ordered_subject
from gateway.ingest.relay import publish_now
from gateway.metrics import Metrics
from gateway.settings import ProviderSettings, Settings

log = logging.getLogger(__name__)


class IngestReplay:
    """Validates a parked webhook again and queues it for the stream (the `ingest` stage)."""

    # The whole settings, not a section: a replay reads the providers and `[outbox]`,
    # and `[ordering]` with `[settlement]` for the ordering key, as the live path does.
    def __init__(
        self,
        pool: Pool,
        settings: Settings,
        broker: JetStreamBroker | None,
        metrics: Metrics,
    ) -> None:
        self._pool = pool
        self._settings = settings
        self._broker = broker
        self._metrics = metrics
        self._warned = False
        # Keyed as the live path keys events.
        self._ordered = ordered_subject(settings.ordering, settings.settlement)

    async def __call__(self, row: DlqRow) -> None:
        provider = self._settings.providers.get(row.provider)
        if provider is None:
            raise ProviderNotConfigured(f"provider {row.provider!r} is not configured")
        entry = get_provider(provider.scheme)
        if provider.confirmation is not None:
            found = await self._confirmed(provider, provider.confirmation, entry.document, row)
            if found is None:
                return
            event = found
        else:
            event = self._webhook(provider, entry.document, row)
        if event.failure is not None or event.event_type is None or event.subject is None:
            failure = event.failure or Failure(ErrorClass.PAYLOAD_INVALID, "no subject")
            message = failure.message
            if failure.error_class == ErrorClass.EVENT_ID_INVALID:
                # The id its body digest stands in for can only come from the provider.
                message += (
                    "; an event without a usable id stays parked: have the provider "
                    "send it again with one, or resolve this row once handled by hand"
                )
            raise StillInvalid(failure.error_class, message)
        await self._queue(row, event, event.event_type, event.subject)

    def _webhook(self, provider: ProviderSettings, decode: Decode | None, row: DlqRow) -> Event:
        """The webhook shaped again with the provider's current configuration (`decode`:
        how its body is read, `Provider.document`)."""
        scheme = get_scheme(provider.scheme)
        # The signature is deliberately not verified again: it was verified when the
        # request arrived (an unverified request is never stored), and its signed
        # timestamp would now be outside the tolerance window.
        event = webhook_event(
            provider.name,
            scheme.id_ref(provider.params),
            scheme.type_ref(provider.params),
            row.headers,
            row.payload,
            row.received_at,
            header_policy=provider.headers,
            event_types=provider.event_types,
            order_rules=provider.order_key,
            ordered=self._ordered,
            decode=decode,
        )
        if event.event_id != row.event_id:
            # Recording it under another id would bypass the idempotency gate.
            raise EventIdChanged(
                f"the current configuration reads event id {event.event_id!r}, "
                f"but the event was recorded as {row.event_id!r}{_digest_note(row.event_id)}"
            )
        return event

    async def _confirmed(
        self,
        provider: ProviderSettings,
        confirmation: Confirmation,
        decode: Decode | None,
        row: DlqRow,
    ) -> Event | None:
        """A row of a provider whose webhooks are confirmed by a fetch. A webhook whose
        type owes a fetch is never published itself: its fetch is owed again, as when it
        arrived (None); one of another type (GoCardless's mandates) is shaped again as
        any webhook. An event its fetch found is shaped again as the confirm stage
        shapes one."""
        async with transaction(self._pool) as conn:
            recorded = await recorded_as(conn, row.provider, row.event_id)
            if recorded is None:
                raise EventNotRecorded(
                    f"no processed_webhooks row for {row.provider}/{row.event_id}"
                )
            source, event_type = recorded
            if source != Source.CONFIRMED:
                webhook = self._webhook(provider, decode, row)
                if not confirmation.owed(webhook.event_type):
                    return webhook
                await rearm(conn, row.provider, row.event_id)
                return None
        shaping = Shaping(provider.name, provider.event_types, provider.order_key, self._ordered)
        item = Confirmed(row.event_id, event_type or "", row.payload)
        (event,) = confirmed_events(shaping, [item], row.received_at)
        return event

    async def _queue(self, row: DlqRow, event: Event, event_type: str, subject: str) -> None:
        """Give the recorded row its type and subject, so the outbox publishes it."""
        key_seq = None
        async with transaction(self._pool) as conn:
            # A keyed event is numbered as a new one would be: under its key's lock, taken
            # before the row is written (its fresh transaction id is its place in the walk).
            if event.order_key is not None:
                await lock_keys(conn, [(event.provider, event.order_key)])
            state, webhook_id, received_at = await queue_for_outbox(
                conn, row.provider, row.event_id, event_type, subject
            )
            if state is OutboxState.QUEUED and webhook_id is not None and event.order_key:
                key_seq = await number_row(conn, webhook_id, event.provider, event.order_key)
        if state is OutboxState.MISSING or webhook_id is None or received_at is None:
            raise EventNotRecorded(f"no processed_webhooks row for {row.provider}/{row.event_id}")
        if state is OutboxState.ALREADY_PUBLISHED or self._broker is None:
            return  # published before (a no-op replay), or the outbox relay will do it
        if not self._broker.connected:
            if not self._warned:
                self._warned = True
                log.warning("NATS unreachable: replayed events wait for the outbox relay")
            return
        stored = StoredEvent(
            webhook_id, dataclasses.replace(event, received_at=received_at, key_seq=key_seq)
        )
        try:
            # Publishing now is a courtesy: the row is committed with its subject and a
            # fresh transaction id, so the outbox relay publishes it anyway.
            await publish_now(
                self._pool, self._broker, [stored], self._settings.outbox, self._metrics, "replay"
            )
        except GatewayError as exc:
            log.warning("replayed event left to the outbox relay", extra={"error": repr(exc)})


def _digest_note(event_id: str) -> str:
    if not event_id.startswith(DIGEST_ID_PREFIX):
        return ""
    return " (its body digest: it had no usable id when it arrived)"


async def ingest_handler(ctx: ReplayContext) -> StageHandler:
    """Build the `ingest` handler with the run's JetStream connection."""
    return IngestReplay(ctx.pool, ctx.settings, await ctx.broker(), ctx.metrics)
