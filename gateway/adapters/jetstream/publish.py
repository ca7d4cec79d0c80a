"""Pipelined JetStream publishing with one reply subscription for all PubAcks.

nats-py's `publish_async` gives every message its own future, timeout timer and task,
and parses each PubAck with the standard `json` module; for the outbox's batches of
hundreds, that bookkeeping cost the relay more CPU than the publishing itself. Here a
batch shares one waiter: each message's reply subject names its slot, one subscription
records the PubAcks as they arrive, and the batch waits once for all of them.

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
import itertools
from collections.abc import Callable, Sequence

import nats.errors
import orjson
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from gateway.adapters.postgres.webhooks import StoredEvent

# Every library error that means "the message may not have reached the stream".
NATS_ERRORS = (nats.errors.Error, OSError, TimeoutError)

# JetStream's error code (not its text) for "message size exceeds maximum allowed".
_JS_MESSAGE_TOO_LARGE = 10054
_HEADER_LINE = len(b"NATS/1.0\r\n")


def message_bytes(body: bytes, headers: dict[str, str]) -> int:
    """What a message counts against the server's `max_payload`: the body plus the
    headers as nats-py encodes them (`NATS/1.0`, `Key: value` lines, a blank line)."""
    size = _HEADER_LINE + 2
    for key, value in headers.items():
        size += len(key.encode()) + len(value.encode()) + 4
    return size + len(body)


def is_too_large(data: bytes) -> bool:
    """True for JetStream's error reply saying the message exceeds the stream's limit."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    error = doc.get("error") if isinstance(doc, dict) else None
    return isinstance(error, dict) and error.get("err_code") == _JS_MESSAGE_TOO_LARGE


def is_pub_ack(data: bytes) -> bool:
    """True for a JetStream PubAck (`{"stream": ..., "seq": N}`), false for an error
    reply, a status message without a body, or anything unreadable."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return isinstance(doc, dict) and "error" not in doc and isinstance(doc.get("seq"), int)


class _Batch:
    """The answers one batch is waiting for, by position."""

    def __init__(self, size: int) -> None:
        self.acked = [False] * size
        self.too_large: set[int] = set()  # never publishable: park, do not retry
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


class PipelinedPublisher:
    """Publishes batches over one NATS connection; says which messages were acknowledged."""

    def __init__(self, nc: Client, headers: Callable[[StoredEvent], dict[str, str]]) -> None:
        self._nc = nc
        self._headers = headers
        self._prefix = nc.new_inbox()
        self._batches: dict[int, _Batch] = {}
        self._ids = itertools.count()
        self._subscription: Subscription | None = None

    async def _subscribe(self) -> None:
        if self._subscription is None:
            self._subscription = await self._nc.subscribe(f"{self._prefix}.*", cb=self._on_reply)

    async def _on_reply(self, msg: Msg) -> None:
        batch_text, _, index_text = msg.subject.rpartition(".")[2].partition("_")
        try:
            batch = self._batches.get(int(batch_text))
            index = int(index_text)
        except ValueError:
            return  # not a reply to anything this publisher sent
        if batch is not None:  # None: the batch already gave up waiting
            ok = is_pub_ack(msg.data)
            if not ok and is_too_large(msg.data):  # parsed again only on the rare error
                batch.too_large.add(index)
            batch.answer(index, ok)

    async def publish(self, events: Sequence[StoredEvent], timeout_s: float) -> _Batch:
        """Send every event, then wait up to `timeout_s` for all PubAcks; never raises.

        The answer says, by position, whether each event was acknowledged by the stream
        (`acked`) and which can never be (`too_large`).
        """
        batch_id = next(self._ids)
        batch = self._batches[batch_id] = _Batch(len(events))
        max_payload = self._nc.max_payload  # the server's, learned on connect
        try:
            await self._subscribe()
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
                        reply=f"{self._prefix}.{batch_id}_{index}",
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
            del self._batches[batch_id]
        return batch
