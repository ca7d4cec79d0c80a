"""`gateway settle`: the settlement worker, a durable JetStream pull consumer.

Each message is settled idempotently; a failure is retried by `nak` with the delay its
dependency's schedule gives, or parked in `dlq_webhooks` (stage `settlement`) and
`term`-ed. A worker killed mid-message loses nothing: JetStream redelivers what was not
acknowledged after the ack wait, and the settlement is idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import traceback
from collections.abc import Callable
from typing import Any

from gateway import tracing
from gateway.adapters.jetstream.consumer import Delivery, event_from_message, nak_at_once
from gateway.adapters.postgres import connection, transaction
from gateway.adapters.postgres.liveness import DatabaseWatch, answers
from gateway.adapters.postgres.webhooks import record_failure
from gateway.core.events.model import Event, Stage
from gateway.core.failures.disposition import Action, Disposition, Policies, dispose, failure_of
from gateway.core.failures.excerpt import capped
from gateway.core.failures.retry import RetryPolicy
from gateway.errors import AlertNotDelivered, BrokerUnavailable, DatabaseUnavailable, GatewayError
from gateway.settlement.batch import settle_batch
from gateway.settlement.handed_back import HandedBack
from gateway.settlement.items import SettleOutcome
from gateway.settlement.negative_merchants import keep_refreshed
from gateway.settlement.ordered.answers import AfterParked
from gateway.settlement.ordered.gate import OrderedGate
from gateway.settlement.parts import SettlementParts
from gateway.settlement.traced import settle_span
from gateway.settlement.unmapped import Unmapped, keep_recorded, record, say_silent_providers

log = logging.getLogger(__name__)
#: The `dlq.park` span's attributes: one constant, so tracing off builds nothing.
_PARKED = {"gateway.stage": Stage.SETTLEMENT.value}


class SettlementWorker:
    """Fetches batches and settles each batch together (see `settle_batch`)."""

    #: Batches being settled at once: while one commits, the next ones are fetched and
    #: prepared (their ledger transactions still take turns on the accounts they share).
    #: Measured on 2 cores: 1 -> 2 gained about 15 %, 2 -> 3 about 5 %.
    batches_in_flight = 3

    def __init__(self, parts: SettlementParts) -> None:
        self.parts = parts
        self._settings = parts.settings.settlement
        self._semaphore = asyncio.Semaphore(self._settings.concurrency)
        self._policies = Policies(
            consumer=RetryPolicy(self._settings.retry_delays_s),
            ledger=RetryPolicy(parts.settings.ledger.retry_delays_s),
        )
        #: Deliveries given back untried (stepping aside): not attempts of a schedule.
        self.handed_back = HandedBack()
        # `[ordering] enabled = false`: the gate is not there, and nothing is ordered.
        self._gate = (
            OrderedGate(parts, self, self._policies) if parts.settings.ordering.enabled else None
        )
        schemes = {name: p.scheme for name, p in parts.settings.providers.items()}
        self._unmapped = Unmapped(parts.metrics, schemes)
        # A database that stops answering: fetching stops and the messages in hand go
        # back to the stream at once, for a healthy worker (`adapters.postgres.liveness`).
        self.database: DatabaseWatch[Delivery] = DatabaseWatch(
            self._probe, self.hand_back, worker=self._settings.consumer
        )

    async def run(
        self, stop: asyncio.Event | None = None, started: Callable[[], None] | None = None
    ) -> None:
        """Consume until `stop` is set (or forever); `started` is called once the
        consumer and the clearing accounts are there, before the first fetch."""
        stop = stop or asyncio.Event()
        consumer = self.parts.consumer
        await consumer.start()  # waits for the stream, then creates or updates the consumer
        await self.parts.settler.open_clearing_accounts()
        if started is not None:
            started()
        log.info(
            "settlement worker started",
            extra={"consumer": self._settings.consumer, "subjects": list(self._settings.subjects)},
        )
        say_silent_providers({n: p.scheme for n, p in self.parts.settings.providers.items()})
        # The next batch is fetched and prepared while the one before it commits.
        slots = asyncio.Semaphore(self.batches_in_flight)
        batches: set[asyncio.Task[None]] = set()
        negatives = asyncio.create_task(
            keep_refreshed(self.parts.ledger, self.parts.metrics), name="negative-merchants"
        )
        recording = asyncio.create_task(
            keep_recorded(self.parts.pool, self._unmapped), name="unmapped-types"
        )
        watching = asyncio.create_task(self.database.run(), name="database-watch")
        try:
            while not stop.is_set():
                if not self.database.serving.is_set():  # stepped aside: fetch nothing
                    await self.database.until_serving(stop, timeout_s=0.5)
                    # What the last fetch's pull request brought after it returned.
                    if stranded := consumer.delivered():
                        await self.hand_back(stranded)
                    continue
                await slots.acquire()
                # Messages the ordering gate holds are planned again soon, with the next
                # batch or, when none comes, on their own.
                holding = self.holding
                try:
                    messages = await consumer.fetch(
                        self._settings.batch_size, timeout_s=0.25 if holding else 1.0
                    )
                except BrokerUnavailable as exc:
                    slots.release()
                    log.warning("fetch failed", extra={"error": str(exc)})
                    await asyncio.sleep(1.0)
                    continue
                if not messages and not holding:  # none within the timeout
                    slots.release()
                    continue
                if not self.database.serving.is_set():  # stepped aside during the fetch
                    slots.release()
                    await self.hand_back(messages)
                    continue
                task = asyncio.create_task(self._in_slot(slots, messages))
                self.database.track(task, messages)
                batches.add(task)
                task.add_done_callback(batches.discard)
        finally:
            # Stopping (or cancelled): let the batches in hand finish and answer, and put
            # back what the ordering gate holds.
            negatives.cancel()
            recording.cancel()
            watching.cancel()
            if batches:
                await asyncio.wait(batches)
            await self.put_back()
            try:  # the last counts, so a short run's show on the console too
                await record(self.parts.pool, self._unmapped)
            except Exception:
                log.warning("could not record the unmapped event types", exc_info=True)

    async def put_back(self) -> None:
        """Stopping: what the ordering gate holds goes back to the stream."""
        if self._gate is not None:
            await self._gate.put_back()

    async def _probe(self) -> bool:
        return await answers(self.parts.settings.database_url, self.database.policy.probe_timeout_s)

    async def hand_back(self, messages: list[Delivery]) -> None:
        """Stepping aside: every message in hand back to the stream without delay, and
        the pooled connections (to the silent server) replaced before their next use.
        None of them was tried: their retry schedules do not count this delivery."""
        self.handed_back.note(messages)
        await nak_at_once(messages)
        await self.put_back()
        await self.parts.pool.expire_connections()

    @property
    def holding(self) -> int:
        """Waiting messages the ordering gate holds (to be planned again)."""
        return 0 if self._gate is None else self._gate.holding

    async def _in_slot(self, slots: asyncio.Semaphore, messages: list[Delivery]) -> None:
        try:
            await self.handle(messages)
        except Exception:  # settle_batch answers per message; this is a bug, logged
            log.exception("batch handling failed; its messages will be redelivered")
        finally:
            slots.release()

    async def handle(self, messages: list[Delivery]) -> None:
        """Settle a fetched batch together, then answer each message on its own: ack
        after its transfer is committed, nak with a delay, or dead-letter and term."""
        work: list[tuple[Event, int]] = []
        readable: list[Delivery] = []
        for msg in messages:
            try:
                work.append((event_from_message(msg), self.handed_back.attempt(msg)))
                readable.append(msg)
            except Exception:  # a header it cannot read; redelivered after ack_wait
                log.exception("message unreadable; left for redelivery")
        if self._gate is not None and (
            self._gate.holding or any(e.key_seq is not None for e, _ in work)
        ):
            await self._gate.handle(readable, work)
            return
        # Each delivery's span, a child of the publish that sent it (None: not traced).
        spans = [settle_span(m, e, n) for m, (e, n) in zip(readable, work, strict=True)]
        outcomes = await settle_batch(self.parts.settler, work, self._settings.concurrency, spans)
        failed = []
        for msg, (event, deliveries), outcome, span in zip(
            readable, work, outcomes, spans, strict=True
        ):
            if isinstance(outcome, Exception):
                failed.append(self.failed(msg, event, deliveries, outcome, span))
            else:
                await self.settled(msg, outcome, span, event)
        await asyncio.gather(*failed)

    async def settled(
        self,
        msg: Delivery,
        outcome: SettleOutcome,
        span: tracing.Span | None,
        event: Event | None = None,
    ) -> None:
        """Ack a message whose event settled, was settled already, or settles nothing
        (counted with its provider and type, `settlement.unmapped`)."""
        if outcome is SettleOutcome.IGNORED and event is not None:
            self._unmapped.note(event)
        try:  # an ack is only queued on the connection: no task needed for each
            await msg.ack()
        except Exception:  # not acked: redelivered after ack_wait, and harmless
            log.exception("ack failed; the message will be redelivered")
            return
        finally:
            tracing.set_attributes(span, {"gateway.outcome": outcome.value})
            tracing.end(span)
        self.parts.metrics.settlements_total.inc(outcome=outcome.value)
        if outcome is not SettleOutcome.IGNORED:  # the database and the ledger answered
            self.parts.watch.settled(event, msg.num_delivered)

    async def failed(
        self,
        msg: Delivery,
        event: Event,
        deliveries: int,
        exc: Exception,
        span: tracing.Span | None = None,
        then: AfterParked | None = None,
    ) -> Action | None:
        """Retry or dead-letter a message whose settlement failed; `then` is written in
        the dead letter's transaction. What was done (None: neither could be sent)."""
        if isinstance(exc, DatabaseUnavailable):  # is it there at all? (`DatabaseWatch`)
            self.database.suspect()
        async with self._semaphore:
            try:
                with tracing.activated(span):  # its log lines and the parking join its trace
                    decision = dispose(exc, deliveries, random.random, self._policies)
                    outcome = "retry" if decision.action is Action.RETRY else "dead_letter"
                    tracing.set_attributes(span, {"gateway.outcome": outcome})
                    tracing.failed(span, decision.error_class)
                    return await self._failed(msg, event, exc, decision, deliveries, then)
            except Exception:  # never let one message stop the batch; it will be redelivered
                log.exception("message handling failed; left for redelivery")
                return None
            finally:
                tracing.end(span)

    async def _failed(
        self,
        msg: Delivery,
        event: Event,
        exc: BaseException,
        decision: Disposition,
        deliveries: int,
        then: AfterParked | None = None,
    ) -> Action | None:
        metrics = self.parts.metrics
        fields = {
            "provider": event.provider,
            "event_id": event.event_id,
            "subject": msg.subject,
            "error_class": decision.error_class,
            "deliveries": deliveries,
        }
        if not isinstance(exc, GatewayError):
            log.error("unexpected error while settling", exc_info=exc, extra=fields)
        if decision.action is Action.RETRY:
            log.warning("settlement will be retried", extra={**fields, "delay_s": decision.delay_s})
            metrics.retries_total.inc(subject=msg.subject)
            self.parts.watch.retrying(event, decision.error_class, decision.delay_s, deliveries)
            metrics.settlements_total.inc(outcome="retry")
            with contextlib.suppress(GatewayError):
                await self.parts.settler.record_failure(event, exc, final=False)
            await msg.nak(decision.delay_s)
            return Action.RETRY
        try:
            with tracing.current_child("dlq.park", _PARKED) as span:
                tracing.failed(span, decision.error_class)
                await self._dead_letter(event, exc, deliveries, then)
        except GatewayError as dlq_exc:
            # Not parked: keep the message in the stream and try again shortly.
            log.error(
                "could not write the dead letter; retrying",
                extra={**fields, "error": repr(dlq_exc)},
            )
            await msg.nak(5.0)
            return None
        await msg.term()
        metrics.settlements_total.inc(outcome="dead_letter")
        self.parts.watch.finished(event, deliveries)
        metrics.dlq_total.inc(stage=Stage.SETTLEMENT.value, error_class=decision.error_class)
        log.error("settlement dead-lettered", extra={**fields, "critical": decision.critical})
        if decision.critical:
            metrics.critical_total.inc(reason=decision.error_class)
            await self._alert(event, decision, str(exc))
        return Action.DEAD_LETTER

    async def _dead_letter(
        self, event: Event, exc: BaseException, deliveries: int, then: AfterParked | None
    ) -> None:
        failure = failure_of(exc, "".join(traceback.format_exception(exc)))
        # With `then` (the ordering gate's hold or skip), in one transaction with it.
        async with transaction(self.parts.pool) if then else connection(self.parts.pool) as conn:
            dlq_id = await record_failure(
                conn, None, Stage.SETTLEMENT, event, failure, attempts=deliveries
            )
            if then is not None:
                await then(conn, dlq_id)
        with contextlib.suppress(GatewayError):
            await self.parts.settler.record_failure(event, exc, final=True)

    async def _alert(self, event: Event, decision: Disposition, message: str) -> None:
        """POST a critical event to `[alerts] webhook_url`, if configured (best effort)."""
        alerts = self.parts.alerts
        if alerts is None:
            return
        # The same shape as the DLQ threshold alerts (alert/key/status/text), so one
        # receiver (a Slack or PagerDuty hook) shows both alike.
        doc: dict[str, Any] = {
            "alert": "settlement_critical",
            "key": decision.error_class,
            "status": "firing",
            "severity": "critical",
            "text": f"CRITICAL {decision.error_class}: {event.provider}/{event.event_id} "
            f"parked in the DLQ: {capped(message)}",
            "provider": event.provider,
            "event_id": event.event_id,
        }
        try:
            await alerts.post(doc)
        except AlertNotDelivered as exc:
            log.error("critical alert not delivered", extra={"error": str(exc)})
