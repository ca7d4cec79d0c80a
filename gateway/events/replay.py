"""Re-publishing accepted events to the stream (`gateway events replay`).

1. The rows are chosen by id or by filter and read a page at a time, in the order they
   were recorded; nothing in `processed_webhooks` changes (the event was accepted once,
   and stays so).
2. A row without a subject (parked at ingest, never published) or whose payload
   retention removed is skipped with the reason.
3. Every other row is published again with its usual headers, but a `Nats-Msg-Id` of
   its own (`{provider}:{event_id}:replay:{token}`, `core.events.filters.replay_msg_id`)
   so JetStream's duplicate window lets it through, and `Gateway-Replayed: <time>` so a
   consumer can tell. Consumers are idempotent by `(provider, event_id)`, so a replayed
   settlement event settles once, however often it is replayed.
4. A keyed row keeps its `Gateway-Order-Key` and `Gateway-Key-Seq`: settlement applies
   the copy at its place in the key's order (a number already applied is a duplicate
   there), so an event lost from the stream and replayed lets its key's later ones go.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from gateway.adapters.jetstream.broker import message_headers
from gateway.adapters.postgres import Pool, connection
from gateway.adapters.postgres import events as store
from gateway.adapters.postgres.webhooks import StoredEvent
from gateway.core.dlq.model import RowOutcome
from gateway.core.events.filters import EventFilter, replay_msg_id, skip_reason
from gateway.core.events.model import Event
from gateway.core.events.rows import EventBrief, EventRow
from gateway.core.operator_input import pace_delay_s
from gateway.errors import BrokerUnavailable, EventRowNotFound
from gateway.errors.commands import listed_ids

#: Rows read per page: bodies included, so a page stays a few MB at most.
PAGE_ROWS = 100
REPLAYED_HEADER = "Gateway-Replayed"


#: The same four outcomes as a dead letter's replay (one vocabulary for operators).
Outcome = RowOutcome


@dataclass(frozen=True)
class EventResult:
    """One event's outcome, with the reason it was skipped or failed."""

    row: EventBrief
    outcome: Outcome
    message: str | None = None
    msg_id: str | None = None  # the replayed message's Nats-Msg-Id


@dataclass
class EventReplaySummary:
    """Counts for the final line, and every row's result for `--json`."""

    replayed: int = 0
    skipped: int = 0
    failed: int = 0
    would_replay: int = 0
    stopped: str | None = None  # why the run stopped early (NATS went away)
    results: list[EventResult] = field(default_factory=list)

    def add(self, result: EventResult) -> EventResult:
        setattr(self, result.outcome.value, getattr(self, result.outcome.value) + 1)
        self.results.append(result)
        return result

    def to_json(self, dry_run: bool) -> dict[str, Any]:
        return {
            "dry_run": dry_run,
            "replayed": self.replayed,
            "skipped": self.skipped,
            "failed": self.failed,
            "would_replay": self.would_replay,
            "stopped": self.stopped,
            "events": [
                {
                    "id": r.row.id,
                    "provider": r.row.provider,
                    "event_id": r.row.event_id,
                    "event_type": r.row.event_type,
                    "outcome": r.outcome.value,
                    "message": r.message,
                    "msg_id": r.msg_id,
                }
                for r in self.results
            ],
        }


class Publisher(Protocol):
    """`adapters.jetstream.one_shot.OneShotPublisher` as a replay uses it."""

    async def connect(self) -> None: ...

    async def publish(self, subject: str, body: bytes, headers: dict[str, str]) -> bool: ...


@dataclass(frozen=True)
class ReplayRun:
    """How a replay runs; the clock, the token and the sleep are seams for tests."""

    limit: int | None = None
    rate_per_s: float | None = None
    dry_run: bool = False
    token: Callable[[], str] = lambda: uuid.uuid4().hex
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    monotonic: Callable[[], float] = time.monotonic


def replay_headers(row: EventRow, token: str, replayed_at: datetime) -> dict[str, str]:
    """The event's usual stream headers (its key and number included when it has both)
    with the replay's own `Nats-Msg-Id` and the `Gateway-Replayed` time."""
    b = row.brief
    event = Event(
        b.provider,
        b.event_id,
        b.event_type,
        b.subject,
        row.headers,
        row.body,
        b.received_at,
        source=b.source,
        order_key=row.order_key,
        key_seq=row.key_seq,
    )
    headers = message_headers(StoredEvent(b.id, event))
    headers["Nats-Msg-Id"] = replay_msg_id(b.provider, b.event_id, token)
    headers[REPLAYED_HEADER] = replayed_at.isoformat(timespec="seconds")
    return headers


async def replay_events(
    pool: Pool,
    publisher: Publisher,
    f: EventFilter,
    run: ReplayRun,
    on_total: Callable[[int], None] = lambda _: None,
    on_result: Callable[[EventResult], None] = lambda _: None,
) -> EventReplaySummary:
    """Re-publish the events `f` chooses (at most `run.limit`); see the module docstring."""
    async with connection(pool) as conn:
        missing = await store.missing_ids(conn, f.ids)
        if missing:
            raise EventRowNotFound(f"no accepted event with id {listed_ids(missing)}")
        on_total(await store.count_events(conn, f, run.limit))
    summary = EventReplaySummary()
    started_s = run.monotonic()
    attempted = 0
    seen = 0
    after_id = 0
    while run.limit is None or seen < run.limit:
        size = PAGE_ROWS if run.limit is None else min(PAGE_ROWS, run.limit - seen)
        async with connection(pool) as conn:
            page = await store.page_events(conn, f, after_id, size)
        if not page:
            break
        after_id = page[-1].brief.id
        for row in page:
            seen += 1
            reason = skip_reason(row.brief.subject, row.brief.payload_removed_at)
            if reason is not None:
                on_result(summary.add(EventResult(row.brief, Outcome.SKIPPED, reason)))
                continue
            if run.dry_run:
                on_result(summary.add(EventResult(row.brief, Outcome.WOULD_REPLAY)))
                continue
            delay_s = pace_delay_s(started_s, attempted, run.rate_per_s, run.monotonic())
            if delay_s > 0:
                await run.sleep(delay_s)
            attempted += 1
            result = await _publish(publisher, row, run)
            on_result(summary.add(result))
            if result.outcome is Outcome.FAILED:
                summary.stopped = result.message
                return summary  # NATS is away: every next publish would wait and fail
    return summary


async def _publish(publisher: Publisher, row: EventRow, run: ReplayRun) -> EventResult:
    headers = replay_headers(row, run.token(), run.clock())
    msg_id = headers["Nats-Msg-Id"]
    try:
        await publisher.connect()
        stored = await publisher.publish(row.brief.subject or "", row.body, headers)
    except BrokerUnavailable as exc:
        return EventResult(row.brief, Outcome.FAILED, str(exc), msg_id)
    if not stored:  # a fresh token cannot repeat; if it ever did, say so
        return EventResult(row.brief, Outcome.FAILED, "the stream dropped it as a duplicate")
    return EventResult(row.brief, Outcome.REPLAYED, None, msg_id)
