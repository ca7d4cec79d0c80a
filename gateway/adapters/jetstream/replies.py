"""One reply subscription for all of a connection's PubAcks, and reading them.

nats-py's `publish_async` gives every message its own future, timeout timer and task,
and parses each PubAck with the standard `json` module; for the outbox's batches of
hundreds, that bookkeeping cost the relay more CPU than the publishing itself. Here one
subscription takes every reply: a reply subject names a waiter and a slot in it
(`{prefix}.{waiter}_{slot}`), and the waiter is told what came back. The pipelined
publisher waits on a slot per message, the atomic one on a slot per batch.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import orjson
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

#: A waiter's callback: (slot, reply body). A status reply ("no responders") has no body.
OnReply = Callable[[int, bytes], None]


@dataclass(frozen=True)
class Reply:
    """A JetStream publish reply, as far as the gateway reads it."""

    acked: bool  # a PubAck without an error
    err_code: int | None = None  # JetStream's code of an error reply
    batch_count: int | None = None  # `count` of an atomic batch's PubAck
    seq: int | None = None  # the stream sequence acknowledged (a batch's last)


def read_reply(data: bytes) -> Reply:
    """What a reply says: a PubAck (`{"stream": ..., "seq": N}`, with `batch` and `count`
    for an atomic batch), an error reply (`{"error": {"err_code": N}}`), or nothing
    readable (a status message without a body, garbage)."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return Reply(acked=False)
    if not isinstance(doc, dict):
        return Reply(acked=False)
    if "error" in doc:
        error = doc["error"]
        code = error.get("err_code") if isinstance(error, dict) else None
        return Reply(acked=False, err_code=code if isinstance(code, int) else 0)
    seq = doc.get("seq")
    if not isinstance(seq, int):
        return Reply(acked=False)
    count = doc.get("count")
    return Reply(acked=True, batch_count=count if isinstance(count, int) else None, seq=seq)


class Replies:
    """Routes the replies to one connection's publishes to whoever waits for them."""

    def __init__(self, nc: Client) -> None:
        self._nc = nc
        self._prefix = nc.new_inbox()
        self._waiters: dict[int, OnReply] = {}
        self._ids = itertools.count()
        self._subscription: Subscription | None = None

    async def open(self) -> None:
        """Subscribe (once); raises the library's error if it cannot."""
        if self._subscription is None:
            self._subscription = await self._nc.subscribe(f"{self._prefix}.*", cb=self._on_reply)

    def register(self, on_reply: OnReply) -> int:
        """A new waiter's id; `release` it when it stops waiting."""
        waiter = next(self._ids)
        self._waiters[waiter] = on_reply
        return waiter

    def release(self, waiter: int) -> None:
        self._waiters.pop(waiter, None)

    def subject(self, waiter: int, slot: int) -> str:
        """The reply subject for slot `slot` of `waiter`."""
        return f"{self._prefix}.{waiter}_{slot}"

    async def _on_reply(self, msg: Msg) -> None:
        waiter_text, _, slot_text = msg.subject.rpartition(".")[2].partition("_")
        try:
            on_reply = self._waiters.get(int(waiter_text))
            slot = int(slot_text)
        except ValueError:
            return  # not a reply to anything this connection sent
        if on_reply is not None:  # None: the waiter already gave up
            on_reply(slot, msg.data)
