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
from datetime import UTC, datetime
from typing import Any

import httpx
import nats.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from gateway.adapters.postgres import connection
from gateway.adapters.webhook_store import record_failure
from gateway.core.disposition import Action, Disposition, Policies, dispose
from gateway.core.model import Event, Failure, Stage
from gateway.core.retry import RetryPolicy
from gateway.errors import GatewayError
from gateway.settlement.batch import settle_batch
from gateway.settlement.parts import SettlementParts

log = logging.getLogger("gateway.settlement.worker")


def event_from_message(msg: Msg) -> Event:
    """Rebuild the recorded event from a stream message and its gateway headers."""
    headers = msg.headers or {}
    received = headers.get("Gateway-Received-At")
    return Event(
        provider=headers.get("Gateway-Provider", ""),
        event_id=headers.get("Gateway-Event-Id", ""),
        event_type=headers.get("Gateway-Event-Type") or None,
        subject=msg.subject,
        headers={},
        body=msg.data or b"",
        received_at=datetime.fromisoformat(received) if received else datetime.now(UTC),
    )


def consumer_config(parts: SettlementParts) -> ConsumerConfig:
    """The durable consumer: explicit acks, only the configured subjects."""
    s = parts.settings.settlement
    return ConsumerConfig(
        durable_name=s.consumer,
        filter_subjects=list(s.subjects),
        deliver_policy=DeliverPolicy.ALL,
        ack_policy=AckPolicy.EXPLICIT,
        # Failures the worker reports are retried by nak() with the policy's own delay;
        # ack_wait is the safety net for a worker that died without answering. No
        # `backoff` list: with one set, nats-server 2.15 applied it to nak'd messages too
        # and ignored their delays (measured: 0.25 s asked, 2.3 s seen).
        ack_wait=s.ack_wait_s,
        max_deliver=100,  # a safety net far beyond every retry table
        max_ack_pending=max(1000, s.batch_size * 4),
    )


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
        self._alert_url = str(parts.settings.raw.get("alerts", {}).get("webhook_url", "") or "")
        self._policies = Policies(
            consumer=RetryPolicy(self._settings.retry_delays_s),
            ledger=RetryPolicy(parts.settings.ledger.retry_delays_s),
        )

    async def ensure_consumer(self, js: JetStreamContext) -> None:
        await js.add_consumer(self.parts.settings.nats.stream, consumer_config(self.parts))

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Consume until `stop` is set (or forever)."""
        stop = stop or asyncio.Event()
        js = await self.parts.broker.jetstream()
        await self.parts.settler.open_clearing_accounts()
        await self.ensure_consumer(js)
        sub = await js.pull_subscribe_bind(self._settings.consumer, self.parts.settings.nats.stream)
        log.info(
            "settlement worker started",
            extra={"consumer": self._settings.consumer, "subjects": list(self._settings.subjects)},
        )
        # The next batch is fetched and prepared while the one before it commits.
        slots = asyncio.Semaphore(self.batches_in_flight)
        batches: set[asyncio.Task[None]] = set()
        try:
            while not stop.is_set():
                await slots.acquire()
                try:
                    messages = await sub.fetch(self._settings.batch_size, timeout=1.0)
                except (nats.errors.TimeoutError, TimeoutError):
                    slots.release()
                    continue
                except nats.errors.Error as exc:
                    slots.release()
                    log.warning("fetch failed", extra={"error": type(exc).__name__})
                    await asyncio.sleep(1.0)
                    continue
                task = asyncio.create_task(self._in_slot(slots, messages))
                batches.add(task)
                task.add_done_callback(batches.discard)
        finally:
            # Stopping (or cancelled): let the batches in hand finish and answer.
            if batches:
                await asyncio.wait(batches)

    async def _in_slot(self, slots: asyncio.Semaphore, messages: list[Msg]) -> None:
        try:
            await self.handle(messages)
        except Exception:  # settle_batch answers per message; this is a bug, logged
            log.exception("batch handling failed; its messages will be redelivered")
        finally:
            slots.release()

    async def handle(self, messages: list[Msg]) -> None:
        """Settle a fetched batch together, then answer each message on its own: ack
        after its transfer is committed, nak with a delay, or dead-letter and term."""
        work: list[tuple[Event, int]] = []
        readable: list[Msg] = []
        for msg in messages:
            try:
                work.append((event_from_message(msg), msg.metadata.num_delivered))
                readable.append(msg)
            except Exception:  # a header it cannot read; redelivered after ack_wait
                log.exception("message unreadable; left for redelivery")
        outcomes = await settle_batch(self.parts.settler, work, self._settings.concurrency)
        failed = []
        for msg, (event, deliveries), outcome in zip(readable, work, outcomes, strict=True):
            if isinstance(outcome, Exception):
                failed.append(self._guarded(msg, event, deliveries, outcome))
                continue
            try:  # an ack is only queued on the connection: no task needed for each
                await msg.ack()
            except Exception:  # not acked: redelivered after ack_wait, and harmless
                log.exception("ack failed; the message will be redelivered")
                continue
            self.parts.metrics.settlements_total.inc(outcome=outcome.value)
        await asyncio.gather(*failed)

    async def _guarded(self, msg: Msg, event: Event, deliveries: int, exc: Exception) -> None:
        """Retry or dead-letter a message whose settlement failed."""
        async with self._semaphore:
            try:
                decision = dispose(exc, deliveries, random.random, self._policies)
                await self._failed(msg, event, exc, decision, deliveries)
            except Exception:  # never let one message stop the batch; it will be redelivered
                log.exception("message handling failed; left for redelivery")

    async def _failed(
        self, msg: Msg, event: Event, exc: BaseException, decision: Disposition, deliveries: int
    ) -> None:
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
            metrics.settlements_total.inc(outcome="retry")
            with contextlib.suppress(GatewayError):
                await self.parts.settler.record_failure(event, exc, final=False)
            await msg.nak(delay=decision.delay_s)
            return
        try:
            await self._dead_letter(event, exc, decision, deliveries)
        except GatewayError as dlq_exc:
            # Not parked: keep the message in the stream and try again shortly.
            log.error(
                "could not write the dead letter; retrying",
                extra={**fields, "error": repr(dlq_exc)},
            )
            await msg.nak(delay=5.0)
            return
        await msg.term()
        metrics.settlements_total.inc(outcome="dead_letter")
        metrics.dlq_total.inc(stage=Stage.SETTLEMENT.value, error_class=decision.error_class)
        log.error("settlement dead-lettered", extra={**fields, "critical": decision.critical})
        if decision.critical:
            metrics.critical_total.inc(reason=decision.error_class)
            await self._alert(event, decision, str(exc))

    async def _dead_letter(
        self, event: Event, exc: BaseException, decision: Disposition, deliveries: int
    ) -> None:
        detail = "".join(traceback.format_exception(exc))
        failure = Failure(decision.error_class, str(exc) or type(exc).__name__, detail)
        async with connection(self.parts.pool) as conn:
            await record_failure(conn, None, Stage.SETTLEMENT, event, failure, attempts=deliveries)
        with contextlib.suppress(GatewayError):
            await self.parts.settler.record_failure(event, exc, final=True)

    async def _alert(self, event: Event, decision: Disposition, message: str) -> None:
        """POST a critical event to `[alerts] webhook_url`, if configured (best effort)."""
        if not self._alert_url:
            return
        # The same shape as the DLQ threshold alerts (alert/key/status/text), so one
        # receiver (a Slack or PagerDuty hook) shows both alike.
        doc: dict[str, Any] = {
            "alert": "settlement_critical",
            "key": decision.error_class,
            "status": "firing",
            "severity": "critical",
            "text": f"CRITICAL {decision.error_class}: {event.provider}/{event.event_id} "
            f"parked in the DLQ: {message}",
            "provider": event.provider,
            "event_id": event.event_id,
        }
        try:
            async with httpx.AsyncClient(timeout=5) as client:
                await client.post(self._alert_url, json=doc)
        except httpx.HTTPError as exc:
            log.error("critical alert not delivered", extra={"error": type(exc).__name__})
