"""The SQL of the console's overview: the dead-letter figures in three statements, the
outbox's and the held keys' from their own modules, the newest event of each provider,
and the replay jobs still to finish.

Every statement is read along an index, so the page costs the same at a thousand rows
as at millions (bench/console_lists.py prints the plans):
- open rows by stage: `dlq_webhooks_open_page_idx` (only the open rows);
- added and opened per hour: `dlq_webhooks_first_failed_idx` over the last 24 hours;
- resolved per hour: `dlq_webhooks_resolved_at_idx` (sql/018) over the last 24 hours;
- the oldest open row: the first entry of `dlq_webhooks_unresolved_idx`;
- each provider's newest event: one backward step of
  `processed_webhooks_provider_received_idx` (sql/018) per configured provider, so a
  provider silent for a week costs what a busy one does;
- live replay jobs: `replay_jobs_live`, their items by primary key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from gateway.adapters.postgres import Conn, outbox, translate_errors
from gateway.adapters.postgres.ordering import admin as order_admin
from gateway.core.console.overview import (
    HourBucket,
    JobBrief,
    OldestOpen,
    ProviderLast,
    Thresholds,
    UnmappedBrief,
    age_s,
    fill_hours,
    hour_starts,
    provider_last,
)

_OPEN_BY_STAGE = """
SELECT stage, count(*) AS n FROM dlq_webhooks WHERE NOT is_resolved
GROUP BY stage ORDER BY count(*) DESC, stage
"""

_OLDEST_OPEN = """
SELECT id, first_failed_at FROM dlq_webhooks WHERE NOT is_resolved
ORDER BY first_failed_at, id LIMIT 1
"""

# One pass over the last 24 hours of first failures gives the three windows, the alert's
# window and the hourly openings; a second branch the hourly resolutions. `$1` is now,
# `$2` the first chart hour's start, `$3` the alert window in seconds. Hours are UTC
# clock hours whatever the session's time zone: `date_bin` from a UTC midnight counts in
# absolute time, with no time-zone conversion per row (half the cost of the three-argument
# `date_trunc`: 15 ms against 30 ms for a day of 33,000 rows).
_GROWTH = """
SELECT 'opened' AS kind, date_bin('1 hour', first_failed_at, '2000-01-01 00:00+00') AS hour,
       count(*) AS n,
       count(*) FILTER (WHERE first_failed_at > $1::timestamptz - interval '5 minutes') AS n_5m,
       count(*) FILTER (WHERE first_failed_at > $1::timestamptz - interval '1 hour') AS n_1h,
       count(*) FILTER (WHERE first_failed_at > $1::timestamptz - make_interval(secs => $3))
           AS n_window
FROM dlq_webhooks
WHERE first_failed_at > $1::timestamptz - interval '24 hours' AND first_failed_at <= $1
GROUP BY 2
UNION ALL
SELECT 'resolved', date_bin('1 hour', resolved_at, '2000-01-01 00:00+00'), count(*), 0, 0, 0
FROM dlq_webhooks
WHERE is_resolved AND resolved_at >= $2::timestamptz AND resolved_at <= $1
GROUP BY 2
"""

# The configured senders in one statement: a LATERAL backward step per name along
# (provider, received_at). The provider is bounded by a range of one value, not `=`:
# with `=` the planner drops the provider from the ORDER BY and, a sender being a fifth
# of the rows, walked processed_webhooks_received_idx backwards filtering on it, which
# for a silent sender reads every event (943 ms at 1 M events against 0.25 ms this way).
# Ordered by both columns, only this index yields the order without a sort.
_LAST_EVENTS = """
SELECT p.name, last.id, last.received_at
FROM unnest($1::text[]) WITH ORDINALITY AS p(name, n)
LEFT JOIN LATERAL (
    SELECT w.id, w.received_at FROM processed_webhooks w
    WHERE w.provider >= p.name AND w.provider <= p.name
    ORDER BY w.provider DESC, w.received_at DESC LIMIT 1
) last ON true
ORDER BY p.n
"""

# The jobs not yet finished, and how far each got. A job's items are read by its
# primary key range; the live ones are few.
_LIVE_JOBS = """
SELECT j.id, j.kind, j.state, j.created_by, j.created_at, j.total,
       count(i.position) FILTER (WHERE i.state = 'pending') AS pending,
       count(i.position) FILTER (WHERE i.state = 'replayed') AS replayed,
       count(i.position) FILTER (WHERE i.state = 'failed') AS failed,
       count(i.position) FILTER (WHERE i.state = 'skipped') AS skipped
FROM replay_jobs j
LEFT JOIN replay_job_items i ON i.job_id = j.id
WHERE j.state IN ('planned', 'running')
GROUP BY j.id
ORDER BY j.id
LIMIT $1
"""

#: Live jobs the overview lists (the replays page lists them all).
JOBS_SHOWN = 20


@dataclass(frozen=True)
class Growth:
    """Rows added in 5 min / 1 h / 24 h (resolved or not, as the burst alert counts
    them) and in the alert's window, and the chart's hours."""

    added_5m: int
    added_1h: int
    added_24h: int
    added_in_window: int
    hours: tuple[HourBucket, ...]


async def open_by_stage(conn: Conn) -> tuple[tuple[str, int], ...]:
    """Open dead letters per stage, most first. The overview's dearest statement (every
    open row is counted: 300,000 took about 90 ms), so it runs on a connection of its
    own beside the others."""
    with translate_errors():
        stages = await conn.fetch(_OPEN_BY_STAGE)
    return tuple((r["stage"], int(r["n"])) for r in stages)


async def growth(conn: Conn, now: datetime, thresholds: Thresholds) -> Growth:
    """What was added when, and opened and resolved per hour."""
    with translate_errors():
        records = await conn.fetch(_GROWTH, now, hour_starts(now)[0], thresholds.dlq_window_s)
    opening = [r for r in records if r["kind"] == "opened"]
    opened = {r["hour"]: int(r["n"]) for r in opening}
    resolved = {r["hour"]: int(r["n"]) for r in records if r["kind"] == "resolved"}
    return Growth(
        added_5m=sum(int(r["n_5m"]) for r in opening),
        added_1h=sum(int(r["n_1h"]) for r in opening),
        added_24h=sum(opened.values()),
        # A window longer than the 24 hours read is counted to 24 hours.
        added_in_window=sum(int(r["n_window"]) for r in opening),
        hours=fill_hours(now, opened, resolved),
    )


async def oldest_open(conn: Conn, now: datetime) -> OldestOpen | None:
    """The open row that first failed longest ago, and its age."""
    with translate_errors():
        oldest = await conn.fetchrow(_OLDEST_OPEN)
    if oldest is None:
        return None
    first = oldest["first_failed_at"]
    return OldestOpen(int(oldest["id"]), first, age_s(now, first) or 0.0)


async def outbox_owed(conn: Conn) -> tuple[int, float]:
    """(rows the relay still owes the stream, age in seconds of the oldest): the relay's
    own gauges' statement (`gateway_outbox_pending`, `gateway_outbox_lag_seconds`)."""
    return await outbox.outbox_stats(conn)


async def held_keys(conn: Conn, now: datetime) -> tuple[int, float | None]:
    """(ordering keys held, age in seconds of the oldest hold): the hold gauges'."""
    count, oldest = await order_admin.holds(conn)
    return count, age_s(now, oldest)


async def last_events(
    conn: Conn, providers: Sequence[str], now: datetime, silent_after_s: float
) -> tuple[ProviderLast, ...]:
    """Each sender's newest event, in the order given; silent ones marked."""
    if not providers:
        return ()
    with translate_errors():
        records = await conn.fetch(_LAST_EVENTS, list(providers))
    return tuple(
        provider_last(
            r["name"],
            None if r["id"] is None else int(r["id"]),
            r["received_at"],
            now,
            silent_after_s,
        )
        for r in records
    )


async def live_jobs(conn: Conn, limit: int = JOBS_SHOWN) -> tuple[JobBrief, ...]:
    """Replay jobs planned or running, oldest first, with their items' counts."""
    with translate_errors():
        records = await conn.fetch(_LIVE_JOBS, limit)
    return tuple(
        JobBrief(
            id=int(r["id"]),
            kind=r["kind"],
            state=r["state"],
            created_by=r["created_by"],
            created_at=r["created_at"],
            total=int(r["total"]),
            pending=int(r["pending"]),
            replayed=int(r["replayed"]),
            failed=int(r["failed"]),
            skipped=int(r["skipped"]),
        )
        for r in records
    )


#: How far back the overview looks for event types that moved no money, and how many.
UNMAPPED_WINDOW_S = 7 * 86_400
UNMAPPED_SHOWN = 10
_UNMAPPED = """
SELECT provider, event_type, events, last_seen FROM settlement_unmapped
WHERE last_seen >= $1 ORDER BY last_seen DESC, provider, event_type LIMIT $2"""


async def unmapped_types(
    conn: Conn, now: datetime, limit: int = UNMAPPED_SHOWN
) -> tuple[UnmappedBrief, ...]:
    """The payment providers' event types that moved no money within
    `UNMAPPED_WINDOW_S` of `now`, the most recently seen first."""
    since = now - timedelta(seconds=UNMAPPED_WINDOW_S)
    with translate_errors():
        records = await conn.fetch(_UNMAPPED, since, limit)
    return tuple(
        UnmappedBrief(r["provider"], r["event_type"], int(r["events"]), r["last_seen"])
        for r in records
    )
