"""Atomic batch publishing's pure decisions: cutting rows into batches, what a commit
reply means, and what follows from it."""

from __future__ import annotations

import pytest

from gateway.core.relay.batches import (
    BatchLimits,
    Step,
    Verdict,
    halves,
    next_step,
    split,
    verdict,
)


@pytest.mark.parametrize(
    ("sizes", "limits", "expected"),
    [
        # Nothing to publish, nothing to send.
        ([], BatchLimits(3, 1000), []),
        # By count: consecutive batches of at most max_count, the last one shorter.
        ([10] * 7, BatchLimits(3, 1000), [range(0, 3), range(3, 6), range(6, 7)]),
        ([10] * 6, BatchLimits(3, 1000), [range(0, 3), range(3, 6)]),
        # By bytes: a batch ends before the message that would take it past max_bytes.
        ([40, 40, 40, 40], BatchLimits(10, 100), [range(0, 2), range(2, 4)]),
        ([50, 50, 1, 99], BatchLimits(10, 100), [range(0, 2), range(2, 4)]),
        # Exactly at the bound still fits.
        ([60, 40], BatchLimits(10, 100), [range(0, 2)]),
        # A message over max_bytes on its own is a batch of one, in its place.
        ([10, 500, 10], BatchLimits(10, 100), [range(0, 1), range(1, 2), range(2, 3)]),
        ([500], BatchLimits(10, 100), [range(0, 1)]),
        # A batch of one per message.
        ([1, 1, 1], BatchLimits(1, 100), [range(0, 1), range(1, 2), range(2, 3)]),
    ],
)
def test_split_cuts_rows_in_order_by_count_and_bytes(
    sizes: list[int], limits: BatchLimits, expected: list[range]
) -> None:
    batches = split(sizes, limits)
    assert batches == expected
    assert [i for b in batches for i in b] == list(range(len(sizes)))  # order kept, none lost


@pytest.mark.parametrize(("count", "bytes_"), [(0, 100), (10, 0), (-1, 100)])
def test_limits_must_be_positive(count: int, bytes_: int) -> None:
    with pytest.raises(ValueError, match="positive"):
        BatchLimits(count, bytes_)


@pytest.mark.parametrize(
    ("batch", "expected"),
    [
        (range(0, 4), [range(0, 2), range(2, 4)]),
        (range(3, 8), [range(3, 5), range(5, 8)]),
        (range(0, 2), [range(0, 1), range(1, 2)]),
        (range(5, 6), [range(5, 6)]),  # a batch of one cannot be split
    ],
)
def test_halves_split_a_batch_in_two_in_order(batch: range, expected: list[range]) -> None:
    assert halves(batch) == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        # A PubAck of the whole batch.
        ({"acked": True, "batch_count": 3}, Verdict.COMMITTED),
        # A PubAck with another count, or none: not this batch committed as a batch (a
        # server that ignores batch headers acknowledges the last message alone).
        ({"acked": True, "batch_count": 2}, Verdict.FAILED),
        ({"acked": True, "batch_count": None}, Verdict.NOT_ENABLED),
        # The server's error codes.
        ({"err_code": 10201}, Verdict.DUPLICATE),
        ({"err_code": 10199}, Verdict.TOO_MANY),
        ({"err_code": 10176}, Verdict.INCOMPLETE),
        ({"err_code": 10174}, Verdict.NOT_ENABLED),
        ({"err_code": 10179}, Verdict.FAILED),  # a batch id the server refuses
        ({"err_code": 10077}, Verdict.FAILED),  # the stream is full
        ({"err_code": 0}, Verdict.FAILED),  # an error without a code
        # A status without a body ("no responders"), and no answer at all.
        ({}, Verdict.FAILED),
        ({"answered": False}, Verdict.NO_ANSWER),
    ],
)
def test_verdict_reads_the_commit_reply_by_error_code(
    reply: dict[str, object], expected: Verdict
) -> None:
    args: dict[str, object] = {"answered": True, "acked": False, "err_code": None}
    args |= {"batch_count": None, "sent_count": 3} | reply
    assert verdict(**args) is expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("found", "count", "expected"),
    [
        (Verdict.COMMITTED, 5, Step.DONE),
        # Refused only because a batch ahead of it was not stored: send it again.
        (Verdict.NOT_SENT, 5, Step.RESEND),
        # Ids the duplicate window has: one at a time, so it drops the repeats.
        (Verdict.DUPLICATE, 5, Step.SINGLY),
        (Verdict.DUPLICATE, 1, Step.SINGLY),
        # A message refused on its own (too large for the stream): one at a time, so
        # that message is told apart and parked.
        (Verdict.INCOMPLETE, 5, Step.SINGLY),
        # No batches on this stream: one at a time.
        (Verdict.NOT_ENABLED, 5, Step.SINGLY),
        # Over the server's message limit: in halves; one message alone cannot be.
        (Verdict.TOO_MANY, 5, Step.SPLIT),
        (Verdict.TOO_MANY, 1, Step.SINGLY),
        # Refused for another reason: one at a time, so each row fails on its own.
        (Verdict.FAILED, 5, Step.SINGLY),
        # No answer in time: stop here, nothing after it is sent.
        (Verdict.NO_ANSWER, 5, Step.STOP),
    ],
)
def test_next_step_after_each_verdict(found: Verdict, count: int, expected: Step) -> None:
    assert next_step(found, count) is expected
