"""An in-memory stream for driving `SettlementWorker.handle` directly: messages shaped
as the relay publishes them (gateway headers, ordering headers), answered as JetStream
would take the answers (ack and term remove the message, from then on whichever of its
deliveries answers; nak puts it back with one more delivery, unless it is removed), and
events of payments (captures and partial refunds) keyed as ingest keys them."""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import orjson


@dataclass(frozen=True)
class Published:
    """One event as the relay puts it on the stream."""

    provider: str
    event_id: str
    event_type: str
    subject: str
    body: bytes
    order_key: str | None = None
    key_seq: int | None = None
    stored_at_s: float = field(default_factory=time.time)

    def headers(self) -> dict[str, str]:
        headers = {
            "Gateway-Provider": self.provider,
            "Gateway-Event-Id": self.event_id,
            "Gateway-Event-Type": self.event_type,
            "Gateway-Received-At": datetime.fromtimestamp(self.stored_at_s, UTC).isoformat(),
        }
        if self.order_key is not None and self.key_seq is not None:
            headers["Gateway-Order-Key"] = self.order_key
            headers["Gateway-Key-Seq"] = str(self.key_seq)
        return headers


class Message:
    """A `Delivery` as the worker sees it, recording how it was answered."""

    def __init__(
        self, stream: MemoryStream, event: Published, deliveries: int, stream_seq: int
    ) -> None:
        self._stream = stream
        self.event = event
        self.stream_seq = stream_seq
        self.subject = event.subject
        self.headers: Mapping[str, str] = event.headers()
        self.data = event.body
        self.num_delivered = deliveries
        self.answer: str | None = None
        self.delay_s: float | None = None
        self.progress = 0  # how often it was said to be in progress

    def __repr__(self) -> str:
        return f"Message({self.event.event_id!r}, seq={self.event.key_seq}, n={self.num_delivered})"

    async def ack(self) -> None:
        self._answer("ack")

    async def in_progress(self) -> None:
        if self.answer is not None:
            raise AssertionError(f"{self!r} in progress after {self.answer}")
        self.progress += 1

    async def nak(self, delay_s: float | None = None) -> None:
        self.delay_s = delay_s
        self._answer("nak")

    async def term(self) -> None:
        self._answer("term")

    def _answer(self, answer: str) -> None:
        if self.answer is not None:
            # Kept as well as raised: the worker logs and swallows what an answer raises.
            self._stream.twice.append(f"{self!r}: {self.answer}, then {answer}")
            raise AssertionError(f"{self!r} answered twice: {self.answer}, then {answer}")
        self.answer = answer
        self._stream.answered(self)


class MemoryStream:
    """Pending events with their delivery counts; `fetch` hands out a batch (in the
    order given, or shuffled by `rand`), and answers put them back or take them out."""

    def __init__(self) -> None:
        # (event, deliveries so far, stream sequence)
        self.pending: list[tuple[Published, int, int]] = []
        self.answers: list[tuple[Published, str]] = []
        self.out: set[int] = set()  # ids of messages handed out and not answered yet
        self.removed: set[int] = set()  # stream sequences acked or termed
        self.twice: list[str] = []  # deliveries answered more than once (a bug)
        self._next_seq = 0

    def publish(self, *events: Published) -> None:
        for e in events:
            self._next_seq += 1
            self.pending.append((e, 0, self._next_seq))

    def fetch(self, size: int, rand: random.Random | None = None) -> list[Message]:
        if rand is not None:
            rand.shuffle(self.pending)
        taken, self.pending = self.pending[:size], self.pending[size:]
        batch = [Message(self, e, n + 1, seq) for e, n, seq in taken]
        self.out.update(id(m) for m in batch)
        return batch

    def answered(self, msg: Message) -> None:
        self.out.discard(id(msg))
        self.answers.append((msg.event, msg.answer or ""))
        if msg.answer in ("ack", "term"):
            self.removed.add(msg.stream_seq)
            self.pending = [p for p in self.pending if p[2] != msg.stream_seq]
        elif msg.answer == "nak" and msg.stream_seq not in self.removed:
            self.pending.append((msg.event, msg.num_delivered, msg.stream_seq))

    def lose_ack(self, msg: Message) -> None:
        """An ack that never reached the server: the message is delivered again."""
        self.removed.discard(msg.stream_seq)
        self.pending.append((msg.event, msg.num_delivered, msg.stream_seq))

    def redeliver_unanswered(self, batch: Sequence[Message]) -> None:
        """What ack_wait does to messages a worker never answered."""
        for msg in batch:
            if msg.answer is None and msg.stream_seq not in self.removed:
                self.out.discard(id(msg))
                self.pending.append((msg.event, msg.num_delivered, msg.stream_seq))


@dataclass
class Payment:
    """One payment's events in the order its service sent them: a capture, then
    partial refunds; numbered 1, 2, ... under the payment's key."""

    service: str
    payment_id: str
    merchant: str
    capture_minor: int
    refunds_minor: list[int]
    stored_at_s: float = field(default_factory=time.time)

    def events(self) -> list[Published]:
        events = [self._event(1, "payment.captured", self.capture_minor, None)]
        for i, amount in enumerate(self.refunds_minor, start=1):
            events.append(self._event(i + 1, "payment.refunded", amount, f"{self.payment_id}_r{i}"))
        return events

    @property
    def balance_minor(self) -> int:
        """The merchant's balance once every event is applied."""
        return self.capture_minor - sum(self.refunds_minor)

    def _event(self, seq: int, event_type: str, amount: int, refund_id: str | None) -> Published:
        data: dict[str, object] = {
            "settlement_id": self.payment_id,
            "merchant_id": self.merchant,
            "amount_minor": amount,
            "currency": "USD",
        }
        if refund_id is not None:
            data["refund_id"] = refund_id
        event_id = f"{self.payment_id}_e{seq}"
        body = orjson.dumps({"id": event_id, "type": event_type, "data": data})
        return Published(
            f"service:{self.service}",
            event_id,
            event_type,
            f"events.{self.service}.{event_type}",
            body,
            order_key=self.payment_id,
            key_seq=seq,
            stored_at_s=self.stored_at_s,
        )
