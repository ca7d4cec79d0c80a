"""What counts as a PubAck, and how a batch's answers are kept."""

from __future__ import annotations

import pytest

from gateway.adapters.jetstream.publish import _Batch, is_pub_ack, is_too_large, message_bytes


@pytest.mark.parametrize(
    ("data", "acked"),
    [
        (b'{"stream":"WEBHOOKS","seq":7}', True),
        (b'{"stream":"WEBHOOKS","seq":7,"duplicate":true}', True),
        (b'{"error":{"code":503,"err_code":10077,"description":"maximum messages"}}', False),
        (b'{"stream":"WEBHOOKS","seq":7,"error":{"code":500}}', False),
        (b"", False),  # a "no responders" status carries no body
        (b"not json", False),
        (b'{"stream":"WEBHOOKS"}', False),
        (b'{"stream":"WEBHOOKS","seq":"7"}', False),
        (b"[1]", False),
    ],
)
def test_only_a_pub_ack_without_error_counts(data: bytes, acked: bool) -> None:
    assert is_pub_ack(data) is acked


async def test_batch_counts_each_slot_once_and_finishes_when_all_answered() -> None:
    batch = _Batch(3)
    batch.answer(0, True)
    batch.answer(0, False)  # a repeated reply changes nothing
    batch.answer(7, True)  # a slot that does not exist is ignored
    assert not batch.done.is_set()
    batch.answer(2, False)
    batch.answer(1, True)
    assert batch.done.is_set()
    assert batch.acked == [True, True, False]


async def test_empty_batch_is_done_at_once() -> None:
    assert _Batch(0).done.is_set()


def test_message_bytes_counts_headers_as_nats_py_sends_them() -> None:
    """The size checked against max_payload is what the HPUB's total size will be."""
    headers = {"Nats-Msg-Id": "stripe:evt_1", "Gateway-Event-Type": "charge.é"}
    encoded = (
        b"NATS/1.0\r\nNats-Msg-Id: stripe:evt_1\r\nGateway-Event-Type: charge.\xc3\xa9\r\n\r\n"
    )
    assert message_bytes(b"12345", headers) == len(encoded) + 5


@pytest.mark.parametrize(
    ("data", "too_large"),
    [
        (b'{"error":{"code":400,"err_code":10054,"description":"message size exceeds"}}', True),
        (b'{"error":{"code":503,"err_code":10077,"description":"maximum messages"}}', False),
        (b'{"stream":"WEBHOOKS","seq":7}', False),
        (b"", False),
        (b"[10054]", False),
    ],
)
def test_only_jetstreams_size_error_code_means_too_large(data: bytes, too_large: bool) -> None:
    assert is_too_large(data) is too_large
