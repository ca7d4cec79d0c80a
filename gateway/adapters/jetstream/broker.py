"""NATS JetStream: the connection, the `WEBHOOKS` stream, and pipelined publishing.

The connection is kept in the background: if NATS is down when the gateway starts, or
goes away later, acceptance carries on (the outbox holds the events) and publishing
resumes when the server is back. A one-pass command (`gateway reconcile`) uses a
`OneShotPublisher` instead: one connection, no reconnecting, failing fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import StorageType, StreamConfig

from gateway.adapters.jetstream.publish import NATS_ERRORS, PipelinedPublisher
from gateway.adapters.postgres.webhooks import StoredEvent
from gateway.core.content import printable
from gateway.errors import BrokerUnavailable
from gateway.settings import NatsSettings

log = logging.getLogger("gateway.nats")

STREAM_SUBJECTS = ["webhooks.>", "events.>"]


@dataclass(frozen=True)
class PublishResult:
    """Which rows JetStream confirmed, and which it did not (to be retried)."""

    acked: list[int]
    failed: list[int]


def message_headers(stored: StoredEvent) -> dict[str, str]:
    """Headers for the stream: the de-duplication id and where the event came from."""
    event = stored.event
    return {
        "Nats-Msg-Id": event.msg_id,
        "Gateway-Provider": event.provider,
        "Gateway-Event-Id": printable(event.event_id),
        "Gateway-Event-Type": printable(event.event_type or ""),
        "Gateway-Received-At": event.received_at.isoformat(),
    }


class JetStreamBroker:
    """Owns the NATS connection; publishes batches and reports which were acknowledged."""

    def __init__(self, settings: NatsSettings, name: str = "gateway") -> None:
        self._settings = settings
        self._name = name
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._connector: asyncio.Task[None] | None = None
        self._stream_ready = asyncio.Event()
        self._publisher: PipelinedPublisher | None = None

    @property
    def connected(self) -> bool:
        return self._nc is not None and self._nc.is_connected and self._stream_ready.is_set()

    async def start(self, wait_s: float = 2.0) -> None:
        """Begin connecting; wait up to `wait_s` for the first connection, then go on."""
        self._connector = asyncio.create_task(self._connect_forever(), name="nats-connect")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stream_ready.wait(), wait_s)

    async def _connect_forever(self) -> None:
        delay_s = 0.5
        while True:
            try:
                nc = await nats.connect(
                    self._settings.servers,
                    name=self._name,
                    connect_timeout=2,
                    allow_reconnect=True,
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=1,
                    reconnected_cb=self._on_reconnected,
                    disconnected_cb=self._on_disconnected,
                    error_cb=self._on_error,
                )
            except NATS_ERRORS as exc:
                log.warning(
                    "nats connect failed, retrying",
                    extra={"error": type(exc).__name__, "delay_s": delay_s},
                )
                await asyncio.sleep(delay_s)
                delay_s = min(delay_s * 2, 5.0)
                continue
            self._nc = nc
            self._js = nc.jetstream(timeout=self._settings.request_timeout_s)
            await self._ensure_stream_until_ready()
            return

    async def _ensure_stream_until_ready(self) -> None:
        while True:
            try:
                await self.ensure_stream()
                self._stream_ready.set()
                log.info("jetstream ready", extra={"stream": self._settings.stream})
                return
            except BrokerUnavailable as exc:
                log.warning("stream not ready, retrying", extra={"error": str(exc)})
                await asyncio.sleep(1.0)

    async def jetstream(self, timeout_s: float | None = None) -> JetStreamContext:
        """The JetStream context, once connected and the stream is in place."""
        await asyncio.wait_for(self._stream_ready.wait(), timeout_s)
        if self._js is None:
            raise BrokerUnavailable("not connected to NATS")
        return self._js

    async def ensure_stream(self) -> None:
        """Create the stream, or update it to the configured settings."""
        if self._js is None:
            raise BrokerUnavailable("not connected to NATS")
        config = StreamConfig(
            name=self._settings.stream,
            subjects=STREAM_SUBJECTS,
            storage=StorageType.FILE,
            num_replicas=self._settings.replicas,
            duplicate_window=float(self._settings.duplicate_window_s),
        )
        try:
            try:
                await self._js.stream_info(self._settings.stream)
            except nats.js.errors.NotFoundError:
                await self._js.add_stream(config)
            else:
                await self._js.update_stream(config)
        except NATS_ERRORS as exc:
            raise BrokerUnavailable(f"cannot create stream: {type(exc).__name__}") from exc

    async def _on_reconnected(self) -> None:
        log.info("nats reconnected")
        # The server may have come back empty (a new node, a lost store): re-create the
        # stream in the background so the callback does not block the client.
        asyncio.get_running_loop().create_task(self._ensure_stream_until_ready())

    async def _on_disconnected(self) -> None:
        log.warning("nats disconnected")

    async def _on_error(self, exc: Exception) -> None:
        log.warning("nats error", extra={"error": type(exc).__name__})

    async def publish(self, events: Sequence[StoredEvent], timeout_s: float) -> PublishResult:
        """Publish a batch pipelined (all sent, then all acks awaited); never raises.

        A row counts as acknowledged only on a PubAck from the stream; anything else,
        including a timeout, leaves it for the outbox relay.
        """
        nc = self._nc
        if nc is None or not self.connected:
            return PublishResult([], [s.webhook_id for s in events])
        if self._publisher is None:
            self._publisher = PipelinedPublisher(nc, message_headers)
        acked = await self._publisher.publish(events, timeout_s)
        result = PublishResult([], [])
        for stored, ok in zip(events, acked, strict=True):
            (result.acked if ok else result.failed).append(stored.webhook_id)
        return result

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


class OneShotPublisher:
    """Publishes to the stream over a connection of its own, awaiting each PubAck.

    Nothing connects until `connect`: a pass with nothing to publish never needs NATS.
    There is no reconnect loop either: a pass that cannot publish fails fast, and the
    next pass finds the same events again.
    """

    def __init__(self, settings: NatsSettings, name: str) -> None:
        self._settings = settings
        self._name = name
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None

    async def connect(self) -> None:
        """Connect (once); `BrokerUnavailable` if no server answers."""
        if self._nc is not None:
            return
        timeout_s = self._settings.request_timeout_s
        try:
            nc = await nats.connect(
                self._settings.servers,
                name=self._name,
                connect_timeout=max(1, int(timeout_s)),
                # nats-py retries the first connect until every server has failed more than
                # max_reconnect_attempts times (0 would mean for ever): two tries, then give up.
                max_reconnect_attempts=1,
                reconnect_time_wait=0.5,
                allow_reconnect=False,
            )
        except NATS_ERRORS as exc:
            raise BrokerUnavailable(f"NATS is not reachable: {type(exc).__name__}") from exc
        self._nc, self._js = nc, nc.jetstream(timeout=timeout_s)

    async def publish(self, subject: str, body: bytes, headers: dict[str, str]) -> bool:
        """Publish and await the PubAck: True if the stream stored the message, False if
        it dropped it as a duplicate of its `Nats-Msg-Id`; `BrokerUnavailable` when no
        PubAck came (an error reply, a timeout, a lost connection)."""
        if self._js is None:
            raise BrokerUnavailable("not connected to NATS")
        try:
            ack = await self._js.publish(
                subject,
                body,
                timeout=self._settings.request_timeout_s,
                stream=self._settings.stream,
                headers=headers,
            )
        except NATS_ERRORS as exc:
            raise BrokerUnavailable(f"publish not acknowledged: {type(exc).__name__}") from exc
        return not ack.duplicate

    async def close(self) -> None:
        nc, self._nc, self._js = self._nc, None, None
        if nc is not None:
            with contextlib.suppress(*NATS_ERRORS):
                await nc.close()


@contextlib.asynccontextmanager
async def open_one_shot_publisher(
    settings: NatsSettings, name: str
) -> AsyncIterator[OneShotPublisher]:
    """A `OneShotPublisher` for the block's lifetime, closed (if it connected) at the end."""
    publisher = OneShotPublisher(settings, name)
    try:
        yield publisher
    finally:
        await publisher.close()
