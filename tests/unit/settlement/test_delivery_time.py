"""`Delivery.timestamp_s`, the ordering gate's clock, is the time the stream stored the
message, as nats-py reads it, for every reply layout."""

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
def test_the_stored_time_is_the_librarys(reply: str) -> None:
    msg = Msg(None, subject="payments.x", reply=reply)  # type: ignore[arg-type]
    expected_s = msg.metadata.timestamp.timestamp()
    assert Delivery(msg).timestamp_s == pytest.approx(expected_s, abs=1e-5)
    assert Delivery(msg).timestamp_s == pytest.approx(1_700_000_000.123456789, abs=1e-5)
