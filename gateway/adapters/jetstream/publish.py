"""Pipelined JetStream publishing with one reply subscription for all PubAcks.

nats-py's `publish_async` gives every message its own future, timeout timer and task,
and parses each PubAck with the standard `json` module; for the outbox's batches of
hundreds, that bookkeeping cost the relay more CPU than the publishing itself. Here a
batch shares one waiter: each message's reply subject names its slot, one subscription
records the PubAcks as they arrive, and the batch waits once for all of them.

A slot counts as acknowledged only on a PubAck without an error. Anything else (an
error reply, a "no responders" status, no reply within the timeout, a connection lost)
leaves the row for the outbox relay; JetStream's duplicate window absorbs the repeat.
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
            batch.answer(index, is_pub_ack(msg.data))

    async def publish(self, events: Sequence[StoredEvent], timeout_s: float) -> list[bool]:
        """Send every event, then wait up to `timeout_s` for all PubAcks; never raises.

        Returns, by position, whether each event was acknowledged by the stream.
        """
        batch_id = next(self._ids)
        batch = self._batches[batch_id] = _Batch(len(events))
        try:
            await self._subscribe()
            for index, stored in enumerate(events):
                try:
                    await self._nc.publish(
                        stored.event.subject or "",
                        stored.event.body,
                        reply=f"{self._prefix}.{batch_id}_{index}",
                        headers=self._headers(stored),
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
        return list(batch.acked)
