"""A stream message is ordered only with both ordering headers and a positive number."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gateway.adapters.jetstream.consumer import event_from_message


@dataclass
class Msg:
    headers: dict[str, str]
    subject: str = "events.billing.payment.captured"
    data: bytes = b"{}"


BASE = {"Gateway-Provider": "service:billing", "Gateway-Event-Id": "e1"}


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"Gateway-Order-Key": "pay_1", "Gateway-Key-Seq": "3"}, ("pay_1", 3)),
        ({}, (None, None)),  # no headers: unordered
        ({"Gateway-Order-Key": "pay_1"}, (None, None)),  # a key without a number
        ({"Gateway-Key-Seq": "3"}, (None, None)),  # a number without a key
        ({"Gateway-Order-Key": "pay_1", "Gateway-Key-Seq": "0"}, (None, None)),
        ({"Gateway-Order-Key": "pay_1", "Gateway-Key-Seq": "-2"}, (None, None)),
        ({"Gateway-Order-Key": "pay_1", "Gateway-Key-Seq": "x"}, (None, None)),
    ],
)
def test_ordering_headers(extra: dict[str, str], expected: tuple[str | None, int | None]) -> None:
    event = event_from_message(Msg({**BASE, **extra}))  # type: ignore[arg-type]
    assert (event.order_key, event.key_seq) == expected
