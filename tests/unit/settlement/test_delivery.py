"""`Delivery.num_delivered` reads the reply subject as nats-py does, for every layout."""

from __future__ import annotations

import pytest
from nats.aio.msg import Msg
from nats.errors import NotJSMessageError

from gateway.adapters.jetstream.consumer import Delivery


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("$JS.ACK.EVENTS.settle.1.10.9.1700000000000000000.5", 1),
        ("$JS.ACK.EVENTS.settle.37.10.9.1700000000000000000.0", 37),
        # With domain and account hash (and the trailing token newer servers add).
        ("$JS.ACK._.ACCHASH.EVENTS.settle.4.10.9.1700000000000000000.0", 4),
        ("$JS.ACK.hub.ACCHASH.EVENTS.settle.12.10.9.1700000000000000000.0.tok", 12),
    ],
)
def test_the_delivery_count_is_the_librarys(reply: str, expected: int) -> None:
    msg = Msg(None, subject="payments.x", reply=reply)  # type: ignore[arg-type]
    assert Delivery(msg).num_delivered == expected == msg.metadata.num_delivered


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "_INBOX.abc",
        "$JS.ACK.EVENTS.settle.x.10.9.1700000000000000000.5",
        "$JS.NAK.a.b.1.2.3.4.5",
    ],
)
def test_a_reply_that_is_not_jetstreams_raises_where_it_is_read(reply: str) -> None:
    msg = Msg(None, subject="payments.x", reply=reply)  # type: ignore[arg-type]
    with pytest.raises((NotJSMessageError, ValueError)):
        _ = Delivery(msg).num_delivered
