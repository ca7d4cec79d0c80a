"""Pipelined JetStream publishing: every message sent, then all PubAcks awaited at once.

A batch shares one waiter on the connection's reply subscription (`replies`): each
message's reply subject names its slot, and the batch waits once for all of them.

A slot counts as acknowledged only on a PubAck without an error. Anything else (an
error reply, a "no responders" status, no reply within the timeout, a connection lost)
leaves the row for the outbox relay; JetStream's duplicate window absorbs the repeat.

A message larger than the server's `max_payload` (headers included) is never sent: the
server answers one with `-ERR 'Maximum Payload Violation'` and closes the connection,
which would stop all publishing, and nats-py checks only the body against the limit.
Such a slot, and one the stream refuses as larger than its own `max_msg_size`, is
`too_large`: it can never be published, and the caller parks it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

import nats.errors
from nats.aio.client import Client

from gateway.adapters.jetstream.replies import Replies, read_reply
from gateway.adapters.postgres.webhooks import StoredEvent

# Every library error that means "the message may not have reached the stream".
NATS_ERRORS = (nats.errors.Error, OSError, TimeoutError)

# JetStream's error code (not its text) for "message size exceeds maximum allowed".
_JS_MESSAGE_TOO_LARGE = 10054
_HEADER_LINE = len(b"NATS/1.0\r\n")

#: Builds a stored event's message headers (`broker.message_headers`).
Headers = Callable[[StoredEvent], dict[str, str]]


def message_bytes(body: bytes, headers: dict[str, str]) -> int:
    """What a message counts against the server's `max_payload`: the body plus the
    headers as nats-py encodes them (`NATS/1.0`, `Key: value` lines, a blank line)."""
    size = _HEADER_LINE + 2
    for key, value in headers.items():
        size += len(key.encode()) + len(value.encode()) + 4
    return size + len(body)


def is_too_large(data: bytes) -> bool:
    """True for JetStream's error reply saying the message exceeds the stream's limit."""
    return read_reply(data).err_code == _JS_MESSAGE_TOO_LARGE


def is_pub_ack(data: bytes) -> bool:
    """True for a JetStream PubAck (`{"stream": ..., "seq": N}`), false for an error
    reply, a status message without a body, or anything unreadable."""
    return read_reply(data).acked


class Answers:
    """What the stream said about a batch, by position."""

    def __init__(self, size: int) -> None:
        self.acked = [False] * size
        self.too_large: set[int] = set()  # never publishable: park, do not retry

    @property
    def settled(self) -> bool:
        """Every position acknowledged or never publishable."""
        return all(ok or i in self.too_large for i, ok in enumerate(self.acked))


class _Batch(Answers):
    """The answers one pipelined batch is waiting for."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.answered = [False] * size
        self.remaining = size
        self.done = asyncio.Event()
        if size == 0:
            self.done.set()

    def answer(self, index: int, ok: bool) -> None:
        if 0 <= index < len(self.answered) and not self.answered[index]:
            self.answered[index] = True
            self.acked[index] = ok
            self.remaining -= 1
            if self.remaining == 0:
                self.done.set()

    def on_reply(self, index: int, data: bytes) -> None:
        reply = read_reply(data)
        if reply.err_code == _JS_MESSAGE_TOO_LARGE and 0 <= index < len(self.acked):
            self.too_large.add(index)
        self.answer(index, reply.acked)


class PipelinedPublisher:
    """Publishes batches over one NATS connection; says which messages were acknowledged."""

    def __init__(self, nc: Client, headers: Headers, replies: Replies | None = None) -> None:
        self._nc = nc
        self._headers = headers
        self._replies = replies if replies is not None else Replies(nc)

    async def publish(self, events: Sequence[StoredEvent], timeout_s: float) -> Answers:
        """Send every event, then wait up to `timeout_s` for all PubAcks; never raises.

        The answer says, by position, whether each event was acknowledged by the stream
        (`acked`) and which can never be (`too_large`).
        """
        batch = _Batch(len(events))
        waiter = self._replies.register(batch.on_reply)
        max_payload = self._nc.max_payload  # the server's, learned on connect
        try:
            await self._replies.open()
            for index, stored in enumerate(events):
                headers = self._headers(stored)
                if message_bytes(stored.event.body, headers) > max_payload:
                    batch.too_large.add(index)
                    batch.answer(index, False)
                    continue
                try:
                    await self._nc.publish(
                        stored.event.subject or "",
                        stored.event.body,
                        reply=self._replies.subject(waiter, index),
                        headers=headers,
                    )
                except NATS_ERRORS:
                    batch.answer(index, False)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await batch.done.wait()
        except NATS_ERRORS:
            pass  # the subscription could not be made: nothing counts as acknowledged
        finally:
            self._replies.release(waiter)
        return batch
