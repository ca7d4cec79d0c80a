"""The ordering gate's waiting room: messages kept behind a batch in flight have room of
their own, so they never crowd out a message waiting for its predecessor, and neither
kind is counted as the other."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from gateway.core.events.model import Event
from gateway.core.ordering.gate import Keyed
from gateway.metrics import Metrics
from gateway.settlement.ordered.holding import WaitingRoom


@dataclass
class Msg:
    """A delivery of stream message `stream_seq`, recording its naks."""

    stream_seq: int
    num_delivered: int = 1
    naks: list[float | None] = field(default_factory=list)

    async def nak(self, delay_s: float | None = None) -> None:
        self.naks.append(delay_s)


def item(seq: int) -> tuple[Event, int]:
    event = Event("stripe", f"evt_{seq}", "charge.refunded", "webhooks.stripe.charge.refunded",
                  {}, b"{}", datetime.now(UTC), order_key="pi_1", key_seq=seq)  # fmt: skip
    return event, 1


def keyed(seq: int) -> Keyed:
    return Keyed(0, "stripe", "pi_1", seq, 1, 0.0)


def waits(metrics: Metrics) -> float:
    return sum(metrics.order_gap_waits_total.values.values())


def test_kept_messages_have_room_of_their_own_and_are_not_waits() -> None:
    metrics = Metrics()
    room = WaitingRoom(metrics, ack_wait_s=30.0, max_held=2, max_kept=1)
    assert room.has_room(1) and not room.has_room(2)
    room.keep_behind(Msg(1), item(1))  # type: ignore[arg-type]
    assert not room.has_room(1)
    # Two waits still fit beside the kept one; a third does not.
    assert room.hold(Msg(2), item(2), keyed(2), {})  # type: ignore[arg-type]
    assert room.hold(Msg(3), item(3), keyed(3), {})  # type: ignore[arg-type]
    assert not room.hold(Msg(4), item(4), keyed(4), {})  # type: ignore[arg-type]
    assert len(room) == 3
    assert waits(metrics) == 2  # the kept one is not a wait (nor is the refused one, here)


def test_a_kept_message_that_comes_to_wait_is_counted_once_and_frees_its_room() -> None:
    metrics = Metrics()
    room = WaitingRoom(metrics, ack_wait_s=30.0, max_held=4, max_kept=1)
    msg = Msg(7)
    room.keep_behind(msg, item(7))  # type: ignore[arg-type]
    held, told = room.take(lambda event: True)
    assert [h.msg.stream_seq for h in held] == [7] and room.has_room(1)
    assert room.hold(msg, item(7), keyed(7), told)  # type: ignore[arg-type]
    assert waits(metrics) == 1
    held, told = room.take(lambda event: True)
    assert room.hold(msg, item(7), keyed(7), told)  # type: ignore[arg-type]
    assert waits(metrics) == 1  # held again: the same wait


def test_a_newer_delivery_waiting_replaces_a_kept_one() -> None:
    room = WaitingRoom(Metrics(), ack_wait_s=30.0, max_held=4, max_kept=1)
    first, again = Msg(9, 1), Msg(9, 2)
    room.keep_behind(first, item(9))  # type: ignore[arg-type]
    assert room.hold(again, item(9), keyed(9), {})  # type: ignore[arg-type]
    assert len(room) == 1 and room.has_room(1)  # the kept delivery gave way
    room.keep_behind(Msg(10), item(10))  # type: ignore[arg-type]
    assert len(room) == 2 and not room.has_room(1)


async def test_stopping_puts_back_kept_and_waiting_messages() -> None:
    room = WaitingRoom(Metrics(), ack_wait_s=30.0, max_held=4, max_kept=1)
    kept, waiting = Msg(1), Msg(2)
    room.keep_behind(kept, item(1))  # type: ignore[arg-type]
    assert room.hold(waiting, item(2), keyed(2), {})  # type: ignore[arg-type]
    await room.put_back()
    assert kept.naks == [0.0] and waiting.naks == [0.0]
    assert len(room) == 0 and room.has_room(1)
