"""An event put back to wait for its turn keeps its retry schedule whole: its attempt
number is its deliveries less the ones the worker spent putting it back."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.core.events.model import Event
from gateway.core.ordering.gate import Keyed
from gateway.metrics import Metrics
from gateway.settlement.ordered.answers import KeyAnswers


class PutBack:
    """A delivery that only records its naks."""

    def __init__(self) -> None:
        self.naks: list[float | None] = []

    async def nak(self, delay_s: float | None = None) -> None:
        self.naks.append(delay_s)


def event(seq: int | None, key: str | None = "pi_1") -> Event:
    return Event("stripe", f"evt_{seq}", "charge.refunded", "webhooks.stripe.charge.refunded",
                 {}, b"{}", datetime.now(UTC), order_key=key, key_seq=seq)  # fmt: skip


async def test_waits_put_back_are_not_attempts() -> None:
    say = KeyAnswers(answers=None, metrics=Metrics(), gap_timeout_s=300.0)  # type: ignore[arg-type]
    msg = PutBack()
    for deliveries in (1, 2, 3):
        await say.wait(msg, Keyed(0, "stripe", "pi_1", 2, deliveries, 0.0), None)  # type: ignore[arg-type]
    assert len(msg.naks) == 3
    assert say.attempt(event(2), 4) == 1  # three deliveries were waits: its first attempt
    assert say.attempt(event(2), 6) == 3
    assert say.attempt(event(3), 4) == 4  # another number of the key waited for nothing
    assert say.attempt(event(None, None), 4) == 4  # unordered: deliveries as they are


async def test_a_put_back_without_a_key_is_no_wait() -> None:
    say = KeyAnswers(answers=None, metrics=Metrics(), gap_timeout_s=300.0)  # type: ignore[arg-type]
    await say.wait(PutBack(), None, 1.0)  # type: ignore[arg-type]  # the worker stopping
    assert say.attempt(event(2), 2) == 2
