"""Order on the stream: what it holds in stream-sequence order, and the verdicts on it.

- `read_in_order` reads every message of the stream (or of one subject filter) with an
  ephemeral consumer that acknowledges nothing, so it is delivered in stream order,
  each message once; it checks the stream sequences rise.
- `publisher_order` (scenario 14): the events one publisher posted one after another
  must be on the stream in that order. The stream may hold a repeat (at least once):
  an event's first occurrence is its place.
- `key_order` (scenario 15): how many messages sit behind a later sequence of their own
  key, which is what the settlement gate has to put right.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import nats
import nats.errors
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from chaos.audit import AuditResult


@dataclass(frozen=True)
class Stored:
    """One message as the stream holds it."""

    stream_seq: int
    subject: str
    provider: str
    event_id: str
    order_key: str | None
    key_seq: int | None


async def read_in_order(
    nats_url: str, subject: str = ">", stream: str = "WEBHOOKS"
) -> list[Stored]:
    """Every message on `subject` in stream order."""
    found: list[Stored] = []
    nc = await nats.connect(nats_url, connect_timeout=5, max_reconnect_attempts=3)
    try:
        js = nc.jetstream(timeout=10)
        expected = (await js.stream_info(stream, subjects_filter=subject)).state.messages
        config = ConsumerConfig(
            ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL, inactive_threshold=30.0
        )
        sub = await js.pull_subscribe(subject, stream=stream, config=config)
        while len(found) < expected:
            try:
                batch = await sub.fetch(1000, timeout=3)
            except (nats.errors.TimeoutError, TimeoutError):
                break  # removed since stream_info: what we have is all there is
            for msg in batch:
                headers = msg.headers or {}
                key_seq = headers.get("Gateway-Key-Seq")
                found.append(
                    Stored(
                        stream_seq=msg.metadata.sequence.stream,
                        subject=msg.subject,
                        provider=headers.get("Gateway-Provider", ""),
                        event_id=headers.get("Gateway-Event-Id", ""),
                        order_key=headers.get("Gateway-Order-Key"),
                        key_seq=int(key_seq) if key_seq is not None else None,
                    )
                )
        await sub.unsubscribe()
    finally:
        await nc.close()
    seqs = [m.stream_seq for m in found]
    if seqs != sorted(set(seqs)):
        raise AssertionError("the consumer did not deliver in stream order")
    return found


class OrderResult(AuditResult):
    """An audit table whose verdict is about order, not the ledger."""

    @property
    def ok(self) -> bool:
        f = self.figures
        return bool(f["missing"] == f["unexpected"] == f["out_of_order"] == 0)


def publisher_order(scenario: str, posted: list[str], stored: list[Stored]) -> OrderResult:
    """Pure: did the stream keep the posted order? `posted`: event ids in the order their
    POSTs were answered 2xx (each sent after the one before it was)."""
    firsts: list[str] = []
    seen: set[str] = set()
    for m in stored:
        if m.event_id not in seen:
            seen.add(m.event_id)
            firsts.append(m.event_id)
    wanted = set(posted)
    on_stream = [e for e in firsts if e in wanted]
    missing = [e for e in posted if e not in seen]
    unexpected = [e for e in firsts if e not in wanted]
    # Positions where the stream's order (of what it holds) differs from the posted one.
    expected_order = [e for e in posted if e in seen]
    differ = [i for i, (a, b) in enumerate(zip(on_stream, expected_order, strict=True)) if a != b]
    problems = [f"missing: {e} got a 2xx but is not on the stream" for e in missing[:5]]
    problems += [f"unexpected: {e} was never posted" for e in unexpected[:5]]
    if differ:
        i = differ[0]
        problems.append(
            f"out of order: stream place {i} holds {on_stream[i]}, posted {expected_order[i]}"
        )
    figures: dict[str, Any] = {
        "posted_2xx": len(posted),
        "stored": len(stored),
        "distinct": len(firsts),
        "repeats": len(stored) - len(firsts),
        "missing": len(missing),
        "unexpected": len(unexpected),
        "out_of_order": len(differ),
        "first_out_of_order": differ[0] if differ else "-",
    }
    return OrderResult(scenario, figures, problems)


def key_order(stored: list[Stored]) -> dict[str, int]:
    """How reordered the stream is per key: messages (first copies) stored after a later
    sequence of their own key, and the keys with at least one."""
    highest: dict[tuple[str, str], int] = {}
    seen: set[tuple[str, str]] = set()
    behind = 0
    keys: set[tuple[str, str]] = set()
    for m in stored:
        if m.order_key is None or m.key_seq is None or (m.provider, m.event_id) in seen:
            continue
        seen.add((m.provider, m.event_id))
        key = (m.provider, m.order_key)
        if m.key_seq < highest.get(key, 0):
            behind += 1
            keys.add(key)
        highest[key] = max(highest.get(key, 0), m.key_seq)
    return {
        "keyed_messages": len(seen),
        "stored_behind_later_seq": behind,
        "keys_reordered": len(keys),
    }
