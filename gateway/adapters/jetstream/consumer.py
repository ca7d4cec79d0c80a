"""A durable JetStream pull consumer, and the messages it hands out as `Delivery`s.

The settlement worker sees no nats type: it fetches plain deliveries (subject, headers,
data, delivery count) and answers each with `ack`, `nak(delay_s)` or `term`. NATS errors
become `BrokerUnavailable` here; a fetch that times out is an empty batch.
"""

from __future__ import annotations

from collections.abc import Mapping

import nats.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from gateway.adapters.jetstream.broker import JetStreamBroker
from gateway.adapters.jetstream.publish import NATS_ERRORS
from gateway.errors import BrokerUnavailable
from gateway.settings import SettlementSettings

_NO_HEADERS: Mapping[str, str] = {}
#: Tokens of a JetStream reply subject without domain and account hash.
_V1_REPLY_TOKENS = 9


def consumer_config(settings: SettlementSettings) -> ConsumerConfig:
    """The durable consumer: explicit acks, only the configured subjects."""
    return ConsumerConfig(
        durable_name=settings.consumer,
        filter_subjects=list(settings.subjects),
        deliver_policy=DeliverPolicy.ALL,
        ack_policy=AckPolicy.EXPLICIT,
        # Failures the worker reports are retried by nak() with the policy's own delay;
        # ack_wait is the safety net for a worker that died without answering. No
        # `backoff` list: with one set, nats-server 2.15 applied it to nak'd messages too
        # and ignored their delays (measured: 0.25 s asked, 2.3 s seen).
        ack_wait=settings.ack_wait_s,
        max_deliver=100,  # a safety net far beyond every retry table
        max_ack_pending=max(1000, settings.batch_size * 4),
    )


class Delivery:
    """One message delivered by the consumer, answered exactly once by the worker.

    An answer is only queued on the connection (no round trip), so answering needs no
    task of its own; one that cannot be sent raises `BrokerUnavailable`, and the stream
    redelivers the message after `ack_wait`.
    """

    # One of these per message on the settlement hot path: slots, no dict.
    __slots__ = ("_msg", "_read", "data", "headers", "subject")

    def __init__(self, msg: Msg) -> None:
        self._msg = msg
        self.subject: str = msg.subject
        self.headers: Mapping[str, str] = msg.headers or _NO_HEADERS
        self.data: bytes = msg.data or b""
        self._read: tuple[int, int] | None = None

    def __repr__(self) -> str:
        return f"Delivery(subject={self.subject!r}, headers={dict(self.headers)!r})"

    @property
    def num_delivered(self) -> int:
        """How often the stream has delivered this message, this time included. Read
        from the reply subject where the worker first asks, so a message whose reply
        cannot be read raises there, not in the middle of a fetch."""
        return self._counts()[0]

    @property
    def stream_seq(self) -> int:
        """The message's sequence in the stream, the same in every delivery of it (the
        ordering gate tells a redelivery of a message it holds by it)."""
        return self._counts()[1]

    def _counts(self) -> tuple[int, int]:
        """(delivery count, stream sequence), read once: the ordering gate asks for them
        several times per message."""
        counts = self._read
        if counts is None:
            counts = self._read = _reply_counts(self._msg)
        return counts

    async def ack(self) -> None:
        """Done: the stream forgets the message."""
        try:
            await self._msg.ack()
        except NATS_ERRORS as exc:
            raise BrokerUnavailable(f"ack not sent: {type(exc).__name__}") from exc

    async def in_progress(self) -> None:
        """Still being worked on: the stream waits another `ack_wait` before it delivers
        the message again (the ordering gate holding a message for its turn)."""
        try:
            await self._msg.in_progress()
        except NATS_ERRORS as exc:
            raise BrokerUnavailable(f"progress not sent: {type(exc).__name__}") from exc

    async def nak(self, delay_s: float | None = None) -> None:
        """Not now: the stream delivers the message again after `delay_s` (None: at once)."""
        try:
            await self._msg.nak(delay=delay_s)
        except NATS_ERRORS as exc:
            raise BrokerUnavailable(f"nak not sent: {type(exc).__name__}") from exc

    async def term(self) -> None:
        """Never again: the message is not redelivered (it has been dead-lettered)."""
        try:
            await self._msg.term()
        except NATS_ERRORS as exc:
            raise BrokerUnavailable(f"term not sent: {type(exc).__name__}") from exc


def _reply_counts(msg: Msg) -> tuple[int, int]:
    """(delivery count, stream sequence) of a delivered message.

    The common reply subject ($JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.
    <consumer seq>.<time>.<pending>) is read directly: nats-py's full metadata (two
    dataclasses and a datetime) cost more than the rest of reading the message.
    """
    reply = msg.reply
    tokens: list[str] = reply.split(".") if reply else []
    if len(tokens) == _V1_REPLY_TOKENS and tokens[0] == "$JS" and tokens[1] == "ACK":
        try:
            return int(tokens[4]), int(tokens[5])
        except ValueError:
            pass
    metadata = msg.metadata  # other layouts, or the library's error
    return metadata.num_delivered, metadata.sequence.stream


class DurablePullConsumer:
    """A durable pull consumer on the broker's stream, created or updated by `start`."""

    def __init__(self, broker: JetStreamBroker, stream: str, settings: SettlementSettings) -> None:
        self._broker = broker
        self._stream = stream
        self._settings = settings
        self._subscription: JetStreamContext.PullSubscription | None = None

    @property
    def name(self) -> str:
        return self._settings.consumer

    async def start(self) -> None:
        """Wait for the broker's stream, then create (or update) the consumer and bind it."""
        js = await self._broker.jetstream()
        try:
            await js.add_consumer(self._stream, consumer_config(self._settings))
            self._subscription = await js.pull_subscribe_bind(self.name, self._stream)
        except NATS_ERRORS as exc:
            raise BrokerUnavailable(
                f"cannot bind consumer {self.name!r}: {type(exc).__name__}"
            ) from exc

    async def fetch(self, batch_size: int, timeout_s: float) -> list[Delivery]:
        """Up to `batch_size` messages; none if none arrive within `timeout_s`."""
        if self._subscription is None:
            raise RuntimeError("fetch before start()")
        try:
            messages = await self._subscription.fetch(batch_size, timeout=timeout_s)
        except (nats.errors.TimeoutError, TimeoutError):
            return []
        except nats.errors.Error as exc:
            raise BrokerUnavailable(f"fetch failed: {type(exc).__name__}") from exc
        return [Delivery(msg) for msg in messages]
