"""NATS JetStream: the connection, the `WEBHOOKS` stream, and publishing batches.

The connection is kept in the background: if NATS is down when the gateway starts, or
goes away later, acceptance carries on (the outbox holds the events) and publishing
resumes when the server is back. A client nats-py closes for good is replaced by a new
one. A one-pass command (`gateway reconcile`) uses `one_shot.OneShotPublisher` instead.

A batch goes out in atomic batches (`atomic`) when the caller asks for them and both
the server (2.12+) and the stream (`allow_atomic`) take them; otherwise one message at a
time, pipelined (`publish`), and the broker says once in the log why. A stream without
`allow_atomic` is looked at again every `ATOMIC_RECHECK_S`: `gateway migrate` may have
added it meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from nats.aio.client import Client
from nats.js import JetStreamContext

from gateway.adapters.jetstream import headers, stream
from gateway.adapters.jetstream.atomic import AtomicPublisher
from gateway.adapters.jetstream.publish import NATS_ERRORS, Answers, PipelinedPublisher
from gateway.adapters.jetstream.replies import Replies
from gateway.adapters.postgres.webhooks import StoredEvent
from gateway.core.bodies.content import printable
from gateway.core.events.model import Source
from gateway.core.relay.batches import BatchLimits
from gateway.core.trace_context import HEADER as TRACEPARENT
from gateway.errors import BrokerUnavailable, StreamMismatch
from gateway.settings import NatsSettings

log = logging.getLogger(__name__)

#: How often a stream that differs from the configuration is looked at again: `gateway
#: migrate` may have updated it meanwhile.
MISMATCH_RECHECK_S = 5.0
#: How often a stream found without `allow_atomic` is looked at again while publishing.
ATOMIC_RECHECK_S = 30.0


@dataclass(frozen=True)
class PublishResult:
    """Which rows JetStream confirmed, and which it did not (to be retried)."""

    acked: list[int]
    failed: list[int]  # sent (or meant to be) and not acknowledged
    too_large: list[int] = field(default_factory=list)  # can never be published: park
    # Not sent at all: an atomic publish stops at a batch without an answer, and sends
    # nothing after it. These count no publish attempt.
    unsent: list[int] = field(default_factory=list)


#: The ordering headers of a keyed, numbered event (a message without both is unordered).
ORDER_KEY_HEADER = "Gateway-Order-Key"
KEY_SEQ_HEADER = "Gateway-Key-Seq"


def message_headers(stored: StoredEvent) -> dict[str, str]:
    """Headers for the stream: the de-duplication id and where the event came from.

    `Gateway-Source` is added only for an event that did not arrive live (`backfill`), so
    consumers can tell a recovered event, and the usual message stays as it was.
    """
    event = stored.event
    headers = {
        "Nats-Msg-Id": event.msg_id,
        "Gateway-Provider": event.provider,
        "Gateway-Event-Id": printable(event.event_id),
        "Gateway-Event-Type": printable(event.event_type or ""),
        "Gateway-Received-At": event.received_at.isoformat(),
    }
    if event.source != Source.LIVE:
        headers["Gateway-Source"] = event.source
    if event.traceparent is not None:  # tracing on: the publish span (flags 00: none)
        headers[TRACEPARENT] = event.traceparent
    # A keyed, numbered event: consumers apply each key's events in this order. The key
    # is header-safe as recorded (`core.ordering.keys.bounded_key`: printable ASCII, no
    # blank ends, at most 200 bytes).
    if event.key_seq is not None and event.order_key is not None:
        headers[ORDER_KEY_HEADER] = event.order_key
        headers[KEY_SEQ_HEADER] = str(event.key_seq)
    return headers


class JetStreamBroker:
    """Owns the NATS connection; publishes batches and reports which were acknowledged."""

    def __init__(self, settings: NatsSettings, name: str = "gateway") -> None:
        self._settings = settings
        self._name = name
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._connector: asyncio.Task[None] | None = None
        self._stream_ready = asyncio.Event()
        # Set once the stream was found as configured, or found different (`_mismatch`).
        self._stream_checked = asyncio.Event()
        self._mismatch: StreamMismatch | None = None
        self._started = False  # `start` has returned: what is found now is logged
        self._publisher: PipelinedPublisher | None = None
        self._atomic_publisher: AtomicPublisher | None = None
        # Whether atomic batches go to this server and stream (decided with the stream),
        # when that was last looked at, and the reasons against them already logged.
        self._atomic = False
        self._atomic_checked_at = 0.0
        self._said: set[str] = set()
        # Set by `close`. nats-py can swallow a task's cancellation (inside `connect` and
        # its requests), so the connector's loops also check this flag and the task's
        # pending cancellation (`_stop_if_asked`): without that, a process told to stop
        # during start-up retried the stream for ever and never exited.
        self._closing = False

    @property
    def connected(self) -> bool:
        """Connected now, with the stream in place (what `/readyz` and the relay ask)."""
        return self._nc is not None and self._nc.is_connected and self._stream_ready.is_set()

    async def start(self, wait_s: float = 2.0) -> None:
        """Begin connecting; wait up to `wait_s` for the first connection, then go on.

        A stream found different from the configuration within that time raises
        `StreamMismatch` (the process must not start); one found later is logged as an
        error and keeps the broker not ready until it matches.
        """
        self._connector = asyncio.create_task(self._connect_forever(), name="nats-connect")
        try:
            await asyncio.wait_for(self._stream_checked.wait(), wait_s)
        except TimeoutError:
            pass
        except asyncio.CancelledError:
            # Stopped while starting: the caller may never reach `close`.
            self._closing = True
            self._connector.cancel()
            raise
        if self._mismatch is not None:
            await self.close()  # the caller never reaches its own `close`
            raise self._mismatch
        self._started = True

    def _stop_if_asked(self) -> None:
        """Raise `CancelledError` when `close` was called or this task was cancelled,
        even if a library swallowed the cancellation itself."""
        task = asyncio.current_task()
        if self._closing or (task is not None and task.cancelling()):
            raise asyncio.CancelledError

    async def _connect_forever(self) -> None:
        """Keep a client for as long as the broker runs.

        nats-py reconnects a client by itself, but some failures close it for good (a
        protocol error such as `Maximum Payload Violation`, or reconnects given up): then
        a new client is built, so one bad moment never stops publishing for good.
        """
        while True:
            closed = asyncio.Event()
            nc = await self._connect(closed)
            try:
                self._stop_if_asked()
            except asyncio.CancelledError:  # connected after being told to stop: undo it
                with contextlib.suppress(*NATS_ERRORS):
                    await nc.close()
                raise
            self._nc, self._publisher, self._atomic_publisher = nc, None, None
            self._js = nc.jetstream(timeout=self._settings.request_timeout_s)
            if nc.max_payload < self._settings.max_payload_bytes:
                log.warning(
                    "nats server takes smaller messages than configured; larger events "
                    "will be parked",
                    extra={
                        "server_max_payload": nc.max_payload,
                        "max_payload_bytes": self._settings.max_payload_bytes,
                    },
                )
            await self._ensure_stream_until_ready(nc)
            await closed.wait()
            self._stream_ready.clear()
            log.warning(
                "nats connection closed; building a new client",
                extra={"error": repr(nc.last_error) if nc.last_error else None},
            )

    async def _connect(self, closed: asyncio.Event) -> Client:
        """Connect, retrying with backoff until a server answers."""
        delay_s = 0.5

        async def on_closed() -> None:
            closed.set()

        while True:
            self._stop_if_asked()
            try:
                return await headers.connect(
                    self._settings.servers,
                    name=self._name,
                    connect_timeout=2,
                    allow_reconnect=True,
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=1,
                    reconnected_cb=self._on_reconnected,
                    disconnected_cb=self._on_disconnected,
                    error_cb=self._on_error,
                    closed_cb=on_closed,
                )
            except NATS_ERRORS as exc:
                log.warning(
                    "nats connect failed, retrying",
                    extra={"error": type(exc).__name__, "delay_s": delay_s},
                )
                await asyncio.sleep(delay_s)
                delay_s = min(delay_s * 2, 5.0)

    async def _ensure_stream_until_ready(self, nc: Client | None = None) -> None:
        while nc is None or not nc.is_closed:
            self._stop_if_asked()
            try:
                await self.ensure_stream()
                self._mismatch = None
                self._stream_ready.set()
                self._stream_checked.set()
                log.info("jetstream ready", extra={"stream": self._settings.stream})
                return
            except BrokerUnavailable as exc:
                log.warning("stream not ready, retrying", extra={"error": str(exc)})
                await asyncio.sleep(1.0)
            except StreamMismatch as exc:
                # Found while starting, it is the error `start` raises; later (NATS came
                # back, or was down at start), the process runs on without publishing.
                new = self._mismatch is None or self._mismatch.differences != exc.differences
                if self._started and new:
                    log.error(str(exc), extra={"stream": self._settings.stream})
                self._mismatch = exc
                self._stream_checked.set()
                await asyncio.sleep(MISMATCH_RECHECK_S)

    async def jetstream(self, timeout_s: float | None = None) -> JetStreamContext:
        """The JetStream context, once connected and the stream is in place."""
        await asyncio.wait_for(self._stream_ready.wait(), timeout_s)
        if self._js is None:
            raise BrokerUnavailable("not connected to NATS")
        return self._js

    async def ensure_stream(self) -> None:
        """Create the stream when it is missing; `StreamMismatch` if it differs from the
        configuration (`gateway migrate` is the one command that changes a stream)."""
        if self._js is None or self._nc is None:
            raise BrokerUnavailable("not connected to NATS")
        batches = stream.server_takes_batches(self._nc)
        found = await stream.ensure_stream(self._js, self._settings, batches=batches)
        if found.created:
            log.info("stream created", extra={"stream": self._settings.stream})
        self._atomic_found(batches, found.atomic)

    def _atomic_found(self, batches: bool, atomic: bool) -> None:
        """Note whether atomic batches can be used; say once why not."""
        self._atomic_checked_at = time.monotonic()
        if atomic and not self._atomic and self._said:
            log.info("atomic batch publishing on", extra={"stream": self._settings.stream})
        self._atomic = atomic
        if not batches and self._nc is not None:
            version = str(self._nc.connected_server_version)
            self._say_once(
                "server",
                "nats server older than 2.12 takes no atomic batches; publishing one "
                "message at a time",
                server_version=version,
            )
        elif not atomic:
            self._say_once(
                "stream",
                "stream lacks allow_atomic; publishing one message at a time until "
                "`gateway migrate` enables it",
            )

    def _say_once(self, reason: str, message: str, **extra: str) -> None:
        if reason not in self._said:
            self._said.add(reason)
            log.warning(message, extra={"stream": self._settings.stream, **extra})

    async def _recheck_atomic(self) -> None:
        """Look at a stream without `allow_atomic` again (`gateway migrate` adds it)."""
        if self._js is None or self._nc is None or not stream.server_takes_batches(self._nc):
            return
        self._atomic_checked_at = time.monotonic()
        try:
            info = await self._js.stream_info(self._settings.stream)
        except NATS_ERRORS:
            return
        self._atomic_found(True, bool(info.config.allow_atomic))

    async def _on_reconnected(self) -> None:
        log.info("nats reconnected")
        # The server may have come back empty (a new node, a lost store): re-create the
        # stream in the background so the callback does not block the client.
        asyncio.get_running_loop().create_task(self._ensure_stream_until_ready(self._nc))

    async def _on_disconnected(self) -> None:
        if not self._closing:  # our own close is not news
            log.warning("nats disconnected")

    async def _on_error(self, exc: Exception) -> None:
        log.warning("nats error", extra={"error": type(exc).__name__})

    async def publish(
        self,
        events: Sequence[StoredEvent],
        timeout_s: float,
        batches: BatchLimits | None = None,
    ) -> PublishResult:
        """Publish rows in order; never raises. With `batches` (and a server and stream
        that take them), as atomic batches of at most that size; otherwise pipelined
        (all sent, then all acks awaited).

        A row counts as acknowledged only on a PubAck from the stream; anything else,
        including a timeout, leaves it for the outbox relay. Rows that can never be
        published (too large for the server, so never sent, or refused as too large by
        the stream) come back in `too_large`.
        """
        nc = self._nc
        if nc is None or not self.connected:
            return PublishResult([], [s.webhook_id for s in events])
        if self._publisher is None:  # one per client: cleared when a new client is built
            replies = Replies(nc)  # one reply subscription for both publishers
            self._publisher = PipelinedPublisher(nc, message_headers, replies)
            self._atomic_publisher = AtomicPublisher(nc, message_headers, replies, self._publisher)
        wanted = batches is not None and batches.max_count > 1
        stale = time.monotonic() - self._atomic_checked_at >= ATOMIC_RECHECK_S
        if wanted and not self._atomic and stale:
            await self._recheck_atomic()
        answers: Answers
        tried: set[int] | None = None  # None: every row was sent
        if wanted and self._atomic and self._atomic_publisher is not None and batches:
            atomic = await self._atomic_publisher.publish(events, timeout_s, batches)
            if atomic.not_enabled:  # the stream was changed under us, or a server without
                self._atomic, self._atomic_checked_at = False, time.monotonic()
                self._say_once(
                    "refused",
                    "the stream refused an atomic batch; publishing one message at a time",
                )
            if atomic.too_many:
                self._say_once(
                    "too_many",
                    "atomic batches over the server's limit are split: lower [outbox] "
                    "publish_batch_max to the server's jetstream.limits.batch.max_msgs",
                    publish_batch_max=str(batches.max_count),
                )
            answers, tried = atomic, atomic.tried
        else:
            answers = await self._publisher.publish(events, timeout_s)
        result = PublishResult([], [])
        for index, (stored, ok) in enumerate(zip(events, answers.acked, strict=True)):
            if ok:
                result.acked.append(stored.webhook_id)
            elif index in answers.too_large:
                result.too_large.append(stored.webhook_id)
            elif tried is not None and index not in tried:
                result.unsent.append(stored.webhook_id)
            else:
                result.failed.append(stored.webhook_id)
        return result

    async def stream_answers(self) -> bool:
        """True if the stream answers a request now. Asked only after a batch got no PubAck
        at all, to tell a broker in trouble from rows that fail on their own."""
        if self._js is None or not self.connected:
            return False
        try:
            await self._js.stream_info(self._settings.stream)
        except NATS_ERRORS:
            return False
        return True

    async def ping(self, timeout_s: float = 1.0) -> bool:
        """True if the server answers a round trip now."""
        if self._nc is None or not self.connected:
            return False
        try:
            await self._nc.flush(timeout=max(1, int(timeout_s)))
        except NATS_ERRORS:
            return False
        return True

    async def close(self) -> None:
        """Flush what was sent and close the connection."""
        self._closing = True
        if self._connector is not None:
            self._connector.cancel()
            # nats-py retries a first connect inside connect() and swallows the cancel for
            # up to ~10 s; shutting down does not wait for that.
            await asyncio.wait([self._connector], timeout=1.0)
        if self._nc is not None:
            # flush, not drain: drain waits out open pull requests (up to 30 s), and every
            # publish that matters has already been acknowledged or left to the outbox.
            with contextlib.suppress(*NATS_ERRORS):
                await self._nc.flush(timeout=2)
            with contextlib.suppress(*NATS_ERRORS):
                await self._nc.close()
