"""A durable JetStream pull consumer, and the messages it hands out as `Delivery`s.

The settlement worker sees no nats type: it fetches plain deliveries (subject, headers,
data, delivery count) and answers each with `ack`, `nak(delay_s)` or `term`. NATS errors
become `BrokerUnavailable` here; a fetch that times out is an empty batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from gateway.adapters.jetstream.broker import JetStreamBroker
from gateway.adapters.jetstream.publish import NATS_ERRORS
from gateway.core.events.model import Event
from gateway.errors import BrokerUnavailable
from gateway.settings import SettlementSettings

log = logging.getLogger(__name__)

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
        # The batches in flight (3), the messages the ordering gate holds waiting (one
        # batch) and those it keeps behind a batch in flight (a quarter of one).
        max_ack_pending=max(1000, settings.batch_size * 5),
    )


def forward_consumer_config(
    durable_name: str | None,
    subjects: list[str],
    *,
    from_start: bool,
    start_time: datetime | None,
    ack_wait_s: float,
    max_ack_pending: int,
) -> ConsumerConfig:
    """A forwarding destination's consumer: durable when named (it resumes where it
    stopped), else ephemeral (removed by the server a minute after its forwarder left).
    A new one starts at `start_time`, else at the stream's start or with new messages."""
    deliver_policy = DeliverPolicy.NEW
    if start_time is not None:
        deliver_policy = DeliverPolicy.BY_START_TIME
    elif from_start:
        deliver_policy = DeliverPolicy.ALL
    return ConsumerConfig(
        durable_name=durable_name,
        filter_subjects=subjects or None,
        deliver_policy=deliver_policy,
        opt_start_time=start_time,
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=ack_wait_s,
        # The forwarder counts attempts itself (`forward_attempts`): a wait behind an
        # earlier event of the key is a delivery, not an attempt.
        max_deliver=-1,
        max_ack_pending=max_ack_pending,
        inactive_threshold=None if durable_name else 60.0,
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


async def nak_at_once(messages: Sequence[Delivery]) -> None:
    """Every message back to the stream for redelivery at once (`nak` without delay),
    all together: what a worker stepping aside holds, for a healthy worker to take. One
    that cannot be handed back is redelivered after `ack_wait` all the same."""
    results = await asyncio.gather(*(m.nak(0.0) for m in messages), return_exceptions=True)
    if any(isinstance(r, Exception) for r in results):
        log.warning("could not hand a message back; it is redelivered after ack_wait")


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


def event_from_message(msg: Delivery) -> Event:
    """Rebuild the recorded event from a stream message and its gateway headers; a
    message with both ordering headers carries its key and number."""
    headers = msg.headers
    received = headers.get("Gateway-Received-At")
    order_key = headers.get("Gateway-Order-Key")
    seq = headers.get("Gateway-Key-Seq")
    # A number that is not a positive decimal is no number: the event is unordered.
    key_seq = int(seq) if seq is not None and seq.isdigit() and int(seq) > 0 else None
    return Event(
        provider=headers.get("Gateway-Provider", ""),
        event_id=headers.get("Gateway-Event-Id", ""),
        event_type=headers.get("Gateway-Event-Type") or None,
        subject=msg.subject,
        headers={},
        body=msg.data,
        received_at=datetime.fromisoformat(received) if received else datetime.now(UTC),
        order_key=order_key if key_seq is not None else None,
        key_seq=key_seq if order_key is not None else None,
    )


class DurablePullConsumer:
    """A pull consumer on the broker's stream, created or updated by `start`: durable
    when its config names it, else ephemeral (the server names it and removes it once
    it has been idle for the config's `inactive_threshold`)."""

    def __init__(self, broker: JetStreamBroker, stream: str, config: ConsumerConfig) -> None:
        self._broker = broker
        self._stream = stream
        self._config = config
        self._name = config.durable_name or ""
        self._subscription: JetStreamContext.PullSubscription | None = None

    @property
    def name(self) -> str:
        """The consumer's name (an ephemeral one's is known once started)."""
        return self._name

    async def start(self) -> None:
        """Wait for the broker's stream, then create (or update) the consumer and bind it.

        A durable consumer that exists keeps where it started: the server refuses to
        change a deliver policy, and where it is now is what matters."""
        js = await self._broker.jetstream()
        config = self._config
        try:
            if config.durable_name:
                with contextlib.suppress(nats.js.errors.NotFoundError):
                    found = (await js.consumer_info(self._stream, config.durable_name)).config
                    config = dataclasses.replace(
                        config,
                        deliver_policy=found.deliver_policy,
                        opt_start_time=found.opt_start_time,
                        opt_start_seq=found.opt_start_seq,
                    )
            info = await js.add_consumer(self._stream, config)
            self._name = info.name
            self._subscription = await js.pull_subscribe_bind(self._name, self._stream)
        except NATS_ERRORS as exc:
            raise BrokerUnavailable(
                f"cannot bind consumer {self._name or '(ephemeral)'!r}: {type(exc).__name__}"
            ) from exc

    def delivered(self) -> list[Delivery]:
        """Messages delivered after their fetch returned, taken without asking for more.

        A fetch's pull request stays open on the server until it expires, a moment after
        the fetch returned; what the server sends meanwhile (a message another worker
        just handed back, say) waits in the subscription for the next fetch. A worker
        that stops fetching must take these and hand them back, or each waits out
        `ack_wait` unanswered. (nats-py keeps them in its subscription's queue, which
        its own next fetch empties first the same way.)
        """
        if self._subscription is None:
            return []
        queue = self._subscription._sub._pending_queue
        found: list[Delivery] = []
        while not queue.empty():
            msg = queue.get_nowait()
            self._subscription._sub._pending_size -= len(msg.data)
            if not JetStreamContext.is_status_msg(msg):  # status lines are for old fetches
                found.append(Delivery(msg))
        return found

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
