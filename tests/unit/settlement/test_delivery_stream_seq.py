"""`Delivery.stream_seq`, how the ordering gate tells a redelivery of a message it holds,
is the message's stream sequence as nats-py reads it, for every reply layout."""

from __future__ import annotations

import pytest
from nats.aio.msg import Msg

from gateway.adapters.jetstream.consumer import Delivery


@pytest.mark.parametrize(
    "reply",
    [
        "$JS.ACK.EVENTS.settle.1.10.9.1700000000123456789.5",
        "$JS.ACK._.ACCHASH.EVENTS.settle.4.10.9.1700000000123456789.0",
        "$JS.ACK.hub.ACCHASH.EVENTS.settle.12.10.9.1700000000123456789.0.tok",
    ],
)
def test_the_stream_sequence_is_the_librarys(reply: str) -> None:
    msg = Msg(None, subject="payments.x", reply=reply)  # type: ignore[arg-type]
    assert Delivery(msg).stream_seq == msg.metadata.sequence.stream == 10


def test_two_deliveries_of_one_message_share_it() -> None:
    first = Msg(None, subject="x", reply="$JS.ACK.S.c.1.77.3.1700000000000000000.0")  # type: ignore[arg-type]
    again = Msg(None, subject="x", reply="$JS.ACK.S.c.2.77.9.1700000005000000000.0")  # type: ignore[arg-type]
    assert Delivery(first).stream_seq == Delivery(again).stream_seq == 77
    assert Delivery(first).num_delivered == 1 and Delivery(again).num_delivered == 2
