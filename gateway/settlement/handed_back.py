"""Deliveries a settlement worker gave back without trying them, so they are not counted
as attempts of the event's retry schedule.

The stream counts every delivery of a message. A worker that steps aside from a database
that does not answer, or cannot read its keys' positions, hands every message in hand
back at once; each such hand-back is a delivery the event never failed. Counted, they
used up a refund's `PAYMENT_NOT_SETTLED` schedule before its first real try, and it was
parked at its first turn while its capture (the next number of its key) was still to
come. The ordering gate's own waits are left out the same way (`KeyAnswers.attempt`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from gateway.adapters.jetstream.consumer import Delivery


class HandedBack:
    """Stream sequence -> the delivery numbers this worker gave back untried (most
    recent last): a delivery handed back twice (the gate and the database watch both
    giving back one batch) counts once. Another worker that takes the message over
    counts every delivery, as the stream does."""

    #: How many messages are remembered (the oldest forgotten first): a forgotten one
    #: counts its hand-backs again, as every delivery was counted before.
    REMEMBERED = 100_000

    def __init__(self, remembered: int = REMEMBERED) -> None:
        self._counts: dict[int, set[int]] = {}
        self._remembered = remembered

    def note(self, messages: Iterable[Delivery]) -> None:
        """These deliveries go back to the stream untried."""
        counts = self._counts
        for msg in messages:
            # A reply subject that cannot be read: such a message is never settled here.
            with contextlib.suppress(Exception):
                seq = msg.stream_seq
                given = counts.pop(seq, set())
                given.add(msg.num_delivered)
                counts[seq] = given
        while len(counts) > self._remembered:
            del counts[next(iter(counts))]

    def attempt(self, msg: Delivery) -> int:
        """The delivery's attempt number: its deliveries less those given back untried
        (at least 1). Raises as `num_delivered` does for an unreadable reply subject."""
        delivered = msg.num_delivered
        if not self._counts:
            return delivered
        given = self._counts.get(msg.stream_seq)
        return delivered if given is None else max(1, delivered - len(given))
