"""Atomic batch publishing (ADR-50, nats-server 2.12+, stream `allow_atomic: true`).

With `sync_interval: always` the stream syncs its disk once per stored write: one
message at a time, however pipelined, that capped the relay near 3,500 messages a
second, while an atomic batch is stored (and synced) at once: 30,000 a second at 100 a
batch, 94,000 at 1,000, on the same machine.

A publish is cut into consecutive batches (`core.relay.batches.split`), sent one after
another: each carries `Nats-Batch-Id`, its `Nats-Batch-Sequence`, and on its last
message `Nats-Batch-Commit` with the one reply subject of the batch (the others need no
reply), and the next is sent only once its commit reply says it was stored. So nothing
lands ahead of a batch that failed, whoever else publishes to the stream meanwhile. The
failed batch is then dealt with alone (`core.relay.batches.next_step`): sent again one
message at a time through the pipelined publisher when it holds an id the duplicate
window has (10201) or a message the stream refuses on its own, split when over the
server's message limit; and the rest goes on from there. A failure without a known
cause (no answer in time) stops the publish: what follows is left for the relay's next
sweep.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence

from nats.aio.client import Client

from gateway.adapters.jetstream.publish import (
    NATS_ERRORS,
    Answers,
    Headers,
    PipelinedPublisher,
    message_bytes,
)
from gateway.adapters.jetstream.replies import Replies, read_reply
from gateway.adapters.jetstream.wire import Encoded, Frames, encode
from gateway.adapters.postgres.webhooks import StoredEvent
from gateway.core.relay.batches import (
    MAX_BATCH_ID_CHARS,
    BatchLimits,
    Step,
    Verdict,
    halves,
    next_step,
    split,
    verdict,
)

BATCH_ID = "Nats-Batch-Id"
BATCH_SEQUENCE = "Nats-Batch-Sequence"
BATCH_COMMIT = "Nats-Batch-Commit"

#: What the batch headers add to a message at most: the longest id, a seven-digit
#: sequence, the commit flag.
BATCH_HEADER_BYTES = message_bytes(
    b"", {BATCH_ID: "x" * MAX_BATCH_ID_CHARS, BATCH_SEQUENCE: "9" * 7, BATCH_COMMIT: "1"}
) - message_bytes(b"", {})


class AtomicAnswers(Answers):
    """`Answers`; which positions were tried for themselves (`tried`: not those after
    the batch that stopped a publish, which were not sent); and whether the server said
    it takes no atomic batches here."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.tried: set[int] = set()
        self.not_enabled = False
        self.too_many = False  # a batch was over the server's limit (and was split)


class _Commits:
    """The commit replies of the batches of one `send_in_turn`, by batch number."""

    def __init__(self, count: int) -> None:
        self.replies: list[bytes | None] = [None] * count
        self.arrived = [asyncio.Event() for _ in range(count)]

    def on_reply(self, slot: int, data: bytes) -> None:
        if 0 <= slot < len(self.replies) and self.replies[slot] is None:
            self.replies[slot] = data
            self.arrived[slot].set()


class AtomicPublisher:
    """Publishes rows as consecutive atomic batches; says which were acknowledged."""

    def __init__(
        self,
        nc: Client,
        headers: Headers,
        replies: Replies,
        singly: PipelinedPublisher,
    ) -> None:
        self._nc = nc
        self._headers = headers
        self._replies = replies
        self._singly = singly
        self._frames = Frames(nc)
        # Unique across connections and processes: a nuid and a counter.
        self._id_prefix = nc.new_inbox().rpartition(".")[2]
        self._batch_ids = itertools.count()

    async def publish(
        self, events: Sequence[StoredEvent], timeout_s: float, limits: BatchLimits
    ) -> AtomicAnswers:
        """Publish `events` in order; never raises. The answer says, by position, which
        the stream acknowledged and which can never be published (`too_large`)."""
        headers = [self._headers(stored) for stored in events]
        run = _Run(self, events, headers, timeout_s)
        try:
            await self._replies.open()
        except NATS_ERRORS:
            return run.answers
        max_payload = self._nc.max_payload  # the server's, learned on connect
        batchable: list[int] = []
        for index, size in enumerate(run.sizes):
            if size > max_payload:  # never sent: the server would close the connection
                run.answers.too_large.add(index)
            elif size + BATCH_HEADER_BYTES > max_payload or run.encoded[index] is None:
                # Fits alone but not with the batch headers, or a subject or header the
                # client refuses (it fails there, alone): published on its own, in turn.
                if not await run.in_batches(batchable, limits) or not await run.singly([index]):
                    return run.answers
                batchable = []
            else:
                batchable.append(index)
        await run.in_batches(batchable, limits)
        return run.answers

    async def send_in_turn(self, run: _Run, batches: Sequence[Sequence[int]]) -> list[Verdict]:
        """Send `batches` one after another, each once the one before it is stored; their
        verdicts, in order. After the first batch not stored nothing more is sent: the
        rest are `NOT_SENT`."""
        verdicts = [Verdict.NOT_SENT] * len(batches)
        commits = _Commits(len(batches))
        waiter = self._replies.register(commits.on_reply)
        try:
            for k, batch in enumerate(batches):
                deadline_s = asyncio.get_running_loop().time() + run.timeout_s
                if not await self._send(run, batch, self._replies.subject(waiter, k)):
                    verdicts[k] = Verdict.NO_ANSWER
                    return verdicts
                verdicts[k] = await self._verdict(commits, k, len(batch), deadline_s)
                if verdicts[k] is not Verdict.COMMITTED:
                    return verdicts
            return verdicts
        finally:
            self._replies.release(waiter)

    async def _send(self, run: _Run, batch: Sequence[int], reply: str) -> bool:
        """Send one batch (the commit reply goes to `reply`); False if the connection
        failed part way (the server abandons an incomplete batch)."""
        batch_id = f"{self._id_prefix}-{next(self._batch_ids)}"
        last = len(batch)
        messages: list[tuple[Encoded, dict[str, str], str]] = []
        for seq, index in enumerate(batch, 1):
            message = run.encoded[index]
            if message is None:  # kept out of batches by `publish`
                raise ValueError(f"row {index} cannot go in a batch")
            extra = {BATCH_ID: batch_id, BATCH_SEQUENCE: str(seq)}
            if seq == last:
                extra[BATCH_COMMIT] = "1"
            messages.append((message, extra, reply if seq == last else ""))
        try:
            await self._frames.send(messages)
        except NATS_ERRORS:
            return False
        return True

    @staticmethod
    async def _verdict(commits: _Commits, k: int, sent_count: int, deadline_s: float) -> Verdict:
        remaining_s = deadline_s - asyncio.get_running_loop().time()
        try:
            async with asyncio.timeout(max(0.0, remaining_s)):
                await commits.arrived[k].wait()
        except TimeoutError:
            return Verdict.NO_ANSWER
        data = commits.replies[k] or b""
        reply = read_reply(data)
        return verdict(
            answered=True,
            acked=reply.acked,
            err_code=reply.err_code,
            batch_count=reply.batch_count,
            sent_count=sent_count,
        )

    async def singly(self, events: Sequence[StoredEvent], timeout_s: float) -> Answers:
        return await self._singly.publish(events, timeout_s)


class _Run:
    """One publish: its rows, their headers, and what the stream said so far."""

    def __init__(
        self,
        publisher: AtomicPublisher,
        events: Sequence[StoredEvent],
        headers: list[dict[str, str]],
        timeout_s: float,
    ) -> None:
        self.publisher = publisher
        self.events = events
        self.headers = headers
        self.timeout_s = timeout_s
        self.answers = AtomicAnswers(len(events))
        self.sizes = [message_bytes(s.event.body, h) for s, h in zip(events, headers, strict=True)]
        self.encoded = [_encoded(s, h) for s, h in zip(events, headers, strict=True)]

    async def in_batches(self, indexes: Sequence[int], limits: BatchLimits) -> bool:
        """Publish the rows at `indexes` (in order) as consecutive batches; False when
        the publish stopped before their end."""
        sizes = [self.sizes[i] for i in indexes]
        pending = [[indexes[i] for i in part] for part in split(sizes, limits)]
        while pending:
            if self.answers.not_enabled:  # no batches here: the rest one at a time
                return await self.singly([i for batch in pending for i in batch])
            verdicts = await self.publisher.send_in_turn(self, pending)
            for k, found in enumerate(verdicts):
                if found is not Verdict.COMMITTED:
                    if not await self.settle(pending[k], found):
                        return False
                    pending = pending[k + 1 :]
                    break
                self.acked(pending[k])
            else:
                return True
        return True

    async def settle(self, batch: Sequence[int], found: Verdict, resent: bool = False) -> bool:
        """Deal with a batch the stream did not store, alone; False to stop the publish."""
        if found is not Verdict.NOT_SENT:  # refused for itself, not left unsent
            self.answers.tried.update(batch)
        if found is Verdict.NOT_ENABLED:
            self.answers.not_enabled = True
        if found is Verdict.TOO_MANY:
            self.answers.too_many = True
        step = next_step(found, len(batch))
        if step is Step.DONE:
            self.acked(batch)
            return True
        if step is Step.RESEND and not resent:
            (again,) = await self.publisher.send_in_turn(self, [batch])
            return await self.settle(batch, again, resent=True)
        if step is Step.SINGLY:
            return await self.in_turn(batch)
        if step is Step.SPLIT:
            for half in halves(range(len(batch))):
                part = [batch[i] for i in half]
                (again,) = await self.publisher.send_in_turn(self, [part])
                if not await self.settle(part, again, resent=True):
                    return False
            return True
        return False  # STOP: no answer

    async def singly(self, indexes: Sequence[int]) -> bool:
        """Publish the rows at `indexes` one message at a time (pipelined)."""
        if not indexes:
            return True
        self.answers.tried.update(indexes)
        sub = await self.publisher.singly([self.events[i] for i in indexes], self.timeout_s)
        for position, index in enumerate(indexes):
            self.answers.acked[index] = sub.acked[position]
            if position in sub.too_large:
                self.answers.too_large.add(index)
        return sub.settled

    async def in_turn(self, indexes: Sequence[int]) -> bool:
        """Publish the rows at `indexes` one message at a time, each once the stream has
        stored the one before, so they are stored in their order; False at the first
        one not stored (the rest are left unsent).

        A batch the stream refused goes this way rather than pipelined: pipelined, a
        message that missed its PubAck would be sent again after later ones the stream
        had stored, and one publisher's events would reach their subject out of order.
        A refusal stops it too ("no responders" while a restarted server has no stream
        yet is one): the row is sent again first by the next sweep, and counts its
        publish attempts until it is stored or parked. Only a message that can never fit
        is passed over (it is parked, never stored).
        """
        for index in indexes:
            self.answers.tried.add(index)
            sub = await self.publisher.singly([self.events[index]], self.timeout_s)
            self.answers.acked[index] = sub.acked[0]
            if 0 in sub.too_large:
                self.answers.too_large.add(index)
            elif not sub.acked[0]:
                return False
        return True

    def acked(self, batch: Sequence[int]) -> None:
        for index in batch:
            self.answers.acked[index] = True


def _encoded(stored: StoredEvent, headers: dict[str, str]) -> Encoded | None:
    """The row's message encoded for batches; None if the client would refuse it."""
    try:
        return encode(stored.event.subject or "", headers, stored.event.body)
    except NATS_ERRORS:
        return None
