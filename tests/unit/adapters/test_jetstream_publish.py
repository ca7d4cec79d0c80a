"""What counts as a PubAck, and how a batch's answers are kept."""

from __future__ import annotations

import pytest

from gateway.adapters.jetstream.publish import _Batch, is_pub_ack


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
