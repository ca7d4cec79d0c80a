"""Per-key numbers at ingest (`order_counters`): the advisory lock each key is numbered
under, the INSERT that numbers a group's keyed rows as it records them, and the number a
replayed row takes after the fact.

Per (provider, order_key), numbers run 1, 2, 3, ... with no gap, in commit order: each
group takes its keys' locks before its first write, moves the counters under them, and
commits its rows and counters together. `webhooks.record_events` runs it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import asyncpg

from gateway.adapters.postgres import Conn, translate_errors

#: The group's rows as `webhooks.record_events` sends them: one JSON document, `$1`. On
#: keyed rows, `n` is the arrival order and `after` how many rows of the row's key come
#: after it in the group.
GROUP_ROWS = """json_to_recordset($1::json)
     AS r(provider text, event_id text, event_type text, subject text, headers jsonb,
          body text, received_at timestamptz, body_sha256 text, source text, traceparent text,
          order_key text, n int, after int)"""

#: How far behind `order_counters.touched_at` may be (`_INSERT_NUMBERED`, 2.): far below
#: any retention horizon, and long enough that a key's events mostly update in place.
TOUCH_GRANULARITY_S = 3600
_TOUCH = f"interval '{TOUCH_GRANULARITY_S} seconds'"

# A group with keyed rows numbers them as it records them, in one statement inside the
# group's transaction ($2: the keys' lock ids; $3, $4, $5: each key's provider, key and
# number of rows in the group).
# 1. `locked`: one lock per key, in ascending order (so two groups sharing keys never
#    deadlock), all taken before the statement's first write. Why before: the first
#    write gives the transaction its id (`outbox_xid`, the relay's walk order). A
#    transaction that got its id and then waited for a key would be walked before the
#    one it waited for, and the stream would carry a key's number 6 before its 5. Locked
#    first, per key: id order = lock order = commit order = number order. `counted`
#    reads from it, so nothing is written until every lock is held (its one row exists
#    only once the count over all of them is done). An advisory lock rather than the
#    counter row's: locking a row writes it (and so takes an id), and a key's first
#    event has no row to lock yet.
# 2. `counted`: each key's counter moves on by its rows in the group, and says where it
#    ends: a row's number is that end less how many of its key's rows come after it.
#    Moving the counter first and numbering from its answer probes each counter once
#    (reading the last number with a subquery first, then moving it to the highest
#    inserted, cost 1.6 to 2.2 us an event more). A repeat is only known once ON
#    CONFLICT skips it: `insert_numbered` then takes back the numbers of repeats that
#    came after their key's new rows (`_GIVE_BACK`), and has the group numbered again
#    without them when one came before (`repeats_before_new`).
#    `touched_at` (retention's idle clock) moves only once it is an hour old: an update
#    that leaves every indexed column as it was is HOT (no new index entries), which
#    measured 10 against 16 us a key. It is never more than `TOUCH_GRANULARITY_S` behind.
_LOCKED_AND_COUNTED = f"""
locked AS MATERIALIZED (
    SELECT count(pg_advisory_xact_lock(k)) AS keys
    FROM (SELECT unnest($2::bigint[]) AS k ORDER BY 1) ids
),
counted AS (
    INSERT INTO order_counters AS c (provider, order_key, last_seq)
    SELECT t.provider, t.order_key, t.rows
    FROM locked, unnest($3::text[], $4::text[], $5::bigint[]) AS t(provider, order_key, rows)
    ON CONFLICT (provider, order_key) DO UPDATE
    SET last_seq = c.last_seq + EXCLUDED.last_seq,
        touched_at = CASE WHEN c.touched_at < now() - {_TOUCH} THEN now() ELSE c.touched_at END
    RETURNING provider, order_key, last_seq
)"""  # noqa: S608 - only constants are interpolated
_INSERT_ROWS = f"""
INSERT INTO processed_webhooks (provider, event_id, event_type, subject, headers, body,
                                received_at, body_sha256, source, traceparent,
                                order_key, key_seq)
SELECT r.provider, r.event_id, r.event_type, r.subject, r.headers,
       decode(r.body, 'base64'), r.received_at, decode(r.body_sha256, 'hex'), r.source,
       r.traceparent, r.order_key, c.last_seq - r.after
FROM {GROUP_ROWS}
LEFT JOIN counted c ON c.provider = r.provider AND c.order_key = r.order_key
ORDER BY r.n
ON CONFLICT DO NOTHING
RETURNING id, provider, event_id, key_seq"""  # noqa: S608 - only constants are interpolated
_INSERT_NUMBERED = f"WITH {_LOCKED_AND_COUNTED}{_INSERT_ROWS}"

# The same as a statement on its own, for a group of new events (nearly every group):
# no BEGIN and COMMIT around it, which cost PostgreSQL about 1.2 us an event. It can
# give no number back, so when a keyed row turns out to be a repeat ($6: how many keyed
# rows there are), `whole` divides by zero: the statement fails as a whole, nothing of
# it stays (the error's SQLSTATE, 22012, can come from nothing else in it), and the
# group is recorded again the transaction's way. `whole` is the preserved side of the
# join, so the check is made even when nothing was inserted.
_INSERT_NUMBERED_WHOLE = f"""
WITH {_LOCKED_AND_COUNTED},
inserted AS ({_INSERT_ROWS}
),
whole AS (
    SELECT 1 / (count(*) FILTER (WHERE key_seq IS NOT NULL) = $6)::int AS ok FROM inserted
)
SELECT i.id, i.provider, i.event_id, i.key_seq
FROM whole LEFT JOIN inserted i ON whole.ok = 1
"""  # noqa: S608 - only constants are interpolated

# The numbers of repeats that came after their key's new rows, given back (the key still
# locked): the counter moves back by them, and a counter this group created for repeats
# only is removed. One key a statement, found by its primary key: rare (a group with a
# keyed repeat), and never a join the planner could turn into a scan of every counter.
_GIVE_BACK = """
WITH removed AS (
    DELETE FROM order_counters WHERE provider = $1 AND order_key = $2 AND last_seq = $3
)
UPDATE order_counters SET last_seq = last_seq - $3
WHERE provider = $1 AND order_key = $2 AND last_seq > $3
"""

# One lock per key, in ascending order, before the transaction's first write
# (`_INSERT_NUMBERED` says why): for a row numbered after the fact (`number_row`).
_LOCK_KEYS = """
SELECT pg_advisory_xact_lock(k) FROM (SELECT unnest($1::bigint[]) AS k ORDER BY 1) keys
"""
#: Attempts at numbering one group before it is refused as not durable (503: the sender
#: retries). Each attempt after the first leaves out the repeats the one before found
#: ahead of new rows of their key; a third needs a concurrent writer to record more of
#: the group's events in between.
NUMBERING_ATTEMPTS = 3


def key_lock_id(provider: str, order_key: str) -> int:
    """The 64-bit advisory lock id of a key (`_LOCK_KEYS`), the same in every process.

    Two keys sharing one only wait for each other; the relay's and retention's own lock
    ids are single constants a 64-bit hash meets with negligible odds.
    """
    digest = hashlib.blake2b(
        f"{provider}\x00{order_key}".encode("utf-8", "surrogatepass"), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


#: A keyed row of a group: (provider, event_id, order_key, its place among the key's rows).
KeyedRow = tuple[str, str, str, int]


class PlannedRowSkipped(Exception):
    """Repeats came before new rows of their key: the group must be numbered again
    without them (`repeats`, their (provider, event_id))."""

    def __init__(self, repeats: frozenset[tuple[str, str]]) -> None:
        super().__init__(f"{len(repeats)} repeats before new rows of their keys")
        self.repeats = repeats


async def insert_numbered(
    conn: Conn, rows_json: str, keyed: Sequence[KeyedRow]
) -> list[asyncpg.Record]:
    """Lock the keys and insert the group, numbering its keyed rows; the rows inserted.
    Inside a transaction that has not written yet; raises `PlannedRowSkipped` (roll it
    back, number the rest again) when a skipped row would leave a gap."""
    with translate_errors():
        rows = await conn.fetch(_INSERT_NUMBERED, rows_json, *_key_arrays(keyed))
    inserted = {(r["provider"], r["event_id"]) for r in rows}
    repeats = repeats_before_new(keyed, inserted)
    if repeats:
        raise PlannedRowSkipped(repeats)
    given_back = _unused(keyed, inserted)
    if given_back:
        with translate_errors():
            await conn.executemany(_GIVE_BACK, given_back)
    return rows


async def insert_numbered_whole(
    conn: Conn, rows_json: str, keyed: Sequence[KeyedRow]
) -> list[asyncpg.Record] | None:
    """`insert_numbered` as one statement outside any transaction, for a group that is
    all new; None, with nothing written, when one of its keyed rows was a repeat (the
    caller records the group in a transaction with `insert_numbered`)."""
    with translate_errors():
        try:
            rows = await conn.fetch(
                _INSERT_NUMBERED_WHOLE, rows_json, *_key_arrays(keyed), len(keyed)
            )
        except asyncpg.DivisionByZeroError:  # a keyed repeat: the statement left nothing
            return None
    return [r for r in rows if r["id"] is not None]


def _key_arrays(keyed: Sequence[KeyedRow]) -> tuple[list[int], list[str], list[str], list[int]]:
    """$2 to $5 of the numbering statements: the keys' lock ids, and each key's provider,
    key and number of rows in the group, in key order."""
    counts = key_counts(keyed)
    keys = sorted(counts)
    return (
        _lock_ids(keys),
        [p for p, _ in keys],
        [k for _, k in keys],
        [counts[key] for key in keys],
    )


def key_counts(keyed: Sequence[KeyedRow]) -> dict[tuple[str, str], int]:
    """How many rows of each (provider, key) the group holds."""
    counts: dict[tuple[str, str], int] = {}
    for provider, _, key, _ in keyed:
        counts[(provider, key)] = counts.get((provider, key), 0) + 1
    return counts


def _unused(
    keyed: Sequence[KeyedRow], inserted: set[tuple[str, str]]
) -> list[tuple[str, str, int]]:
    """(provider, key, count) of the numbers the repeats among `keyed` took."""
    repeats = [row for row in keyed if (row[0], row[1]) not in inserted]
    return [(provider, key, count) for (provider, key), count in key_counts(repeats).items()]


def repeats_before_new(
    keyed: Sequence[KeyedRow], inserted: set[tuple[str, str]]
) -> frozenset[tuple[str, str]]:
    """The keyed rows not inserted, when one of them came before an inserted row of its
    key (its number would be a gap); empty when every skipped row came after its key's
    new ones (the numbers given are 1..m past the counter, as they should be)."""
    last_new: dict[tuple[str, str], int] = {}
    first_skipped: dict[tuple[str, str], int] = {}
    skipped = set()
    for provider, event_id, key, place in keyed:
        if (provider, event_id) in inserted:
            last_new[(provider, key)] = place
        else:
            skipped.add((provider, event_id))
            first_skipped.setdefault((provider, key), place)
    if any(last_new.get(key, 0) > place for key, place in first_skipped.items()):
        return frozenset(skipped)
    return frozenset()


def _lock_ids(keys: Iterable[tuple[str, str]]) -> list[int]:
    return sorted({key_lock_id(provider, key) for provider, key in keys})


# A recorded row numbered after the fact (an `ingest` dead letter replayed once its
# payload passes): the key's next number, unless the row has one already (a second replay
# before the first was published). The caller holds the key's lock (`lock_keys`) and the
# row's (`FOR UPDATE`), in the transaction that queues the row for the outbox.
_NUMBER_ROW = """
WITH target AS (SELECT id FROM processed_webhooks WHERE id = $1 AND key_seq IS NULL),
counted AS (
    INSERT INTO order_counters AS c (provider, order_key, last_seq)
    SELECT $2, $3, 1 FROM target
    ON CONFLICT (provider, order_key) DO UPDATE
    SET last_seq = c.last_seq + 1, touched_at = now()  -- rare: exact is cheap enough
    RETURNING last_seq
),
numbered AS (
    UPDATE processed_webhooks p SET order_key = $3, key_seq = counted.last_seq
    FROM counted WHERE p.id = $1
    RETURNING p.key_seq
)
SELECT coalesce((SELECT key_seq FROM numbered),
                (SELECT key_seq FROM processed_webhooks WHERE id = $1)) AS key_seq
"""


async def lock_keys(conn: Conn, keys: Iterable[tuple[str, str]]) -> None:
    """Take the (provider, order_key) locks ingest numbers under, until the transaction
    ends; call it before the transaction's first write (`_LOCK_KEYS` says why)."""
    with translate_errors():
        await conn.execute(_LOCK_KEYS, _lock_ids(keys))


async def number_row(conn: Conn, webhook_id: int, provider: str, order_key: str) -> int | None:
    """Give a recorded row its key's next number, or keep the one it has; its number
    (None: no such row). Inside the transaction that holds `lock_keys` for the key."""
    with translate_errors():
        value = await conn.fetchval(_NUMBER_ROW, webhook_id, provider, order_key)
    return None if value is None else int(value)
