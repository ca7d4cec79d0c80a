"""Answering a repeat from memory when this process has already seen its row committed.

Providers retry what they think failed, and a gateway that falls behind gets more
retries, not fewer: a burst of repeats feeds itself. Every repeat the idempotency gate
has answered once is known to have a committed row, and rows in `processed_webhooks` are
never deleted by the gateway, so the same question needs no second round trip. The keys
kept here come only from answers of the gate (a commit that inserted the row, or one that
found it already there); an event never seen committed still goes to PostgreSQL, whose
UNIQUE `(provider, event_id)` stays the gate across processes and machines. An event
with a body digest (its signature leaves the id unsigned) is remembered by id and digest
only once accepted: its `duplicate` may answer a replay under a forged id that no row
holds.

The memory is bounded (`[ingest] remembered_keys`, 0 turns it off): two generations of
half the bound each; when the newer fills up, the older is dropped whole. That keeps
every operation O(1) and the footprint at most the whole bound: about 135 bytes a key for
a Stripe-sized event id, 27 MB for the default 200,000.
"""

from __future__ import annotations

from gateway.core.events.model import Event, Outcome
from gateway.ingest.parts import Inbox
from gateway.metrics import Counter


def key_of(event: Event) -> str:
    # A NUL cannot occur in a provider name (config refuses it) and PostgreSQL text
    # cannot hold one, so the joined key is as unique as the pair.
    return f"{event.provider}\x00{event.event_id}"


def digest_key_of(event: Event) -> str | None:
    """The key of the event's body digest, None when it has none: `\x01` after the
    provider name (which holds neither separator) keeps digests apart from event ids."""
    if event.body_sha256 is None:
        return None
    return f"{event.provider}\x01{event.body_sha256.decode('latin-1')}"


class RecordedKeys:
    """A bounded set of keys whose rows are known to be committed; most recent kept."""

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError("capacity must be 0 (off) or positive")
        self.capacity = capacity
        self._generation_size = max(1, capacity // 2)
        self._newer: set[str] = set()
        self._older: set[str] = set()

    def __contains__(self, key: str) -> bool:
        return key in self._newer or key in self._older

    def __len__(self) -> int:
        return len(self._newer) + len(self._older)

    def add(self, key: str) -> None:
        if self.capacity == 0:
            return
        self._newer.add(key)
        if len(self._newer) >= self._generation_size:
            self._older, self._newer = self._newer, set()


class RememberingInbox:
    """The inbox behind a memory of recorded keys: a known repeat is a duplicate at once."""

    def __init__(self, inner: Inbox, keys: RecordedKeys, answered: Counter) -> None:
        self._inner = inner
        self._keys = keys
        self._answered = answered  # gateway_duplicates_from_memory_total

    async def accept(self, event: Event) -> Outcome:
        if event.awaits_confirmation:
            # A repeat of a webhook that names an object asks for another fetch (the
            # object may have changed): only the database can owe it.
            return await self._inner.accept(event)
        key = key_of(event)
        digest_key = digest_key_of(event)
        if key in self._keys or (digest_key is not None and digest_key in self._keys):
            self._answered.inc()
            return Outcome.DUPLICATE
        outcome = await self._inner.accept(event)
        if digest_key is None:
            # Either answer means the row is committed; an exception means nothing is known.
            self._keys.add(key)
        elif outcome is Outcome.ACCEPTED:
            self._keys.add(key)
            self._keys.add(digest_key)
        # A duplicate with a digest may be a replay under a forged id: no row holds that
        # id, so remembering it would answer a later genuine event with it `duplicate`.
        return outcome

    async def close(self) -> None:
        await self._inner.close()
