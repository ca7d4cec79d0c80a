"""Atomic batch publishing to JetStream (ADR-50): pure decisions, no I/O.

The relay hands the broker the walk's next rows in `(outbox_xid, id)` order; the broker
cuts them into consecutive atomic batches (`split`), sends them one after another, and
reads each batch's commit reply. What a reply means (`verdict`) and what to do next
(`next_step`) are decided here, from the server's error code, never its text.

Order is the rule everything here serves: a batch is stored whole or not at all, and the
next one is sent only once the one before it is stored, so none lands ahead of one that
failed; the failed batch is dealt with on its own before anything after it is sent.
(Several batches in flight, chained by `Nats-Expected-Last-Sequence`, would overlap a
batch's disk sync with the next one's sending; but that condition counts messages, not
whose they are: a replay or a backfill publishing as many messages as a refused batch
held would let the batches after it land first. One in flight measured no slower here.)
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

#: The longest `Nats-Batch-Id` the server takes (10179 beyond it).
MAX_BATCH_ID_CHARS = 64

# JetStream's error codes (`err_code`) for what a batch's commit reply can say.
JS_ATOMIC_NOT_ENABLED = 10174  # the stream lacks `allow_atomic`
JS_ATOMIC_INCOMPLETE = 10176  # a message of the batch went missing or was refused
JS_ATOMIC_TOO_MANY = 10199  # more messages than the server's `max_msgs`
JS_ATOMIC_DUPLICATE = 10201  # a `Nats-Msg-Id` the duplicate window (or the batch) has


@dataclass(frozen=True)
class BatchLimits:
    """How large one atomic batch may be: by messages, and by their bytes (headers and
    body, as `message_bytes` counts them)."""

    max_count: int
    max_bytes: int

    def __post_init__(self) -> None:
        if self.max_count < 1 or self.max_bytes < 1:
            raise ValueError(f"batch limits must be positive, got {self}")


def split(sizes_bytes: Sequence[int], limits: BatchLimits) -> list[range]:
    """Cut messages (their sizes, in order) into consecutive batches: each at most
    `max_count` messages and `max_bytes` bytes, except that a message larger than
    `max_bytes` on its own is a batch of one (whether it fits the server is the
    `max_payload` check's business, not this one's)."""
    batches: list[range] = []
    start, held_bytes = 0, 0
    for index, size in enumerate(sizes_bytes):
        full = index - start >= limits.max_count or held_bytes + size > limits.max_bytes
        if index > start and full:
            batches.append(range(start, index))
            start, held_bytes = index, 0
        held_bytes += size
    if start < len(sizes_bytes):
        batches.append(range(start, len(sizes_bytes)))
    return batches


def halves(batch: range) -> list[range]:
    """A batch refused for its size, cut in two (a batch of one stays whole)."""
    if len(batch) < 2:
        return [batch]
    middle = batch.start + len(batch) // 2
    return [range(batch.start, middle), range(middle, batch.stop)]


class Verdict(enum.StrEnum):
    """What a batch's commit reply says."""

    COMMITTED = "committed"  # stored whole
    NOT_SENT = "not_sent"  # not sent: a batch before it was not stored
    DUPLICATE = "duplicate"  # holds a message id the stream already has (10201)
    TOO_MANY = "too_many"  # over the server's message limit per batch (10199)
    INCOMPLETE = "incomplete"  # a message refused on its own (too large for the stream)
    NOT_ENABLED = "not_enabled"  # the stream does not take atomic batches (10174)
    FAILED = "failed"  # refused for another reason (no stream for a subject, a full one)
    NO_ANSWER = "no_answer"  # nothing came back in time, or the connection failed


_BY_CODE = {
    JS_ATOMIC_DUPLICATE: Verdict.DUPLICATE,
    JS_ATOMIC_TOO_MANY: Verdict.TOO_MANY,
    JS_ATOMIC_INCOMPLETE: Verdict.INCOMPLETE,
    JS_ATOMIC_NOT_ENABLED: Verdict.NOT_ENABLED,
}


def verdict(
    *,
    answered: bool,
    acked: bool,
    err_code: int | None,
    batch_count: int | None,
    sent_count: int,
) -> Verdict:
    """Classify a commit reply: `acked` for a PubAck, `err_code` when the server refused
    the batch, `batch_count` the `count` of its PubAck.

    A PubAck without a batch count, or with another count, is not a committed batch: a
    server that does not know batches stores the messages one by one and acknowledges
    the last (they are sent again one at a time, and the duplicate window drops them).
    """
    if not answered:
        return Verdict.NO_ANSWER
    if err_code is not None:
        return _BY_CODE.get(err_code, Verdict.FAILED)
    if not acked:  # a status without a body ("no responders"), or garbage
        return Verdict.FAILED
    if batch_count is None:
        return Verdict.NOT_ENABLED
    return Verdict.COMMITTED if batch_count == sent_count else Verdict.FAILED


class Step(enum.StrEnum):
    """What to do with a batch after its verdict."""

    DONE = "done"  # every row acknowledged
    RESEND = "resend"  # send it again as it is, now that the batches before it are settled
    SINGLY = "singly"  # one message at a time: the duplicate window drops the repeats
    SPLIT = "split"  # in two halves, each a batch of its own
    STOP = "stop"  # leave it and everything after it for the next sweep


def next_step(found: Verdict, count: int) -> Step:
    """The step after `found` for a batch of `count` messages.

    - A duplicate id (after a relay died mid-batch, or rows published ahead of the relay
      by a replay or a backfill) and a message refused on its own go one at a time: the
      window drops the repeats, and a message too large for the stream is told apart.
    - A stream without `allow_atomic` (or a server without batches) takes them one at a
      time too; the broker stops batching.
    - A batch over the server's message limit is split; a batch of one cannot be, and
      goes alone.
    - A batch refused for another reason goes one message at a time as well, so one row
      the stream will not take (its subject bound to no stream) cannot hold the others
      of its batch: each counts toward `max_publish_attempts` on its own.
    - No answer stops the publish: the cursor stays before the batch, and nothing after
      it is sent (the relay's next sweep tries again).
    """
    if found is Verdict.COMMITTED:
        return Step.DONE
    if found is Verdict.NOT_SENT:
        return Step.RESEND
    if found is Verdict.TOO_MANY:
        return Step.SPLIT if count > 1 else Step.SINGLY
    if found is Verdict.NO_ANSWER:
        return Step.STOP
    return Step.SINGLY
