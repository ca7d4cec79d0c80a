"""The ordering property, checked from the database alone.

Per (provider, order_key), settlement's log (`order_log`) must read like this:

- in `id` order (commit order) its sequences rise by exactly 1, starting at 1;
- the last one equals `order_applied.applied_seq` (no row there means 0);
- every row that is not 'applied' is explained: 'skipped' by an operator's release
  (actor and note) or by a dead letter of its event; 'deferred' by its resolution
  ('settled', or 'parked' with a dead letter), or, while the run is still live, by
  nothing yet (its event is in its retries); after a drain an open deferral is explained
  only by a dead letter still open for its event;
- a logged event is the one ingest numbered: its `processed_webhooks` row (when the row
  is still there) carries the same key and sequence;
- a hold sits beyond what is applied (one at or below `applied_seq` should have been
  released) and names a dead letter that exists.

`violations(conn)` runs it as one query and returns one line per key that breaks it;
an empty list means the property holds. `summary(conn)` gives the figures a report shows
beside it (keys checked, log rows by outcome, keys held, and keys not held whose last
numbered event, per ingest's counters, is not applied yet).
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.adapters.postgres import Conn

#: Problems spelled out per key; the line counts the rest.
_SHOWN_PER_KEY = 5

# One pass over the log with window functions, then one row per key (the keys of the log
# and of order_applied, so an applied position without a log, or a log without a
# position, is caught too). $1: the run is live (open deferrals allowed); $2: a key's
# log must start at 1 (false where retention has trimmed old log rows).
_VIOLATIONS = """
WITH walked AS (
    SELECT l.*, lag(l.key_seq) OVER w AS prev_seq, row_number() OVER w AS nth
    FROM order_log l
    WINDOW w AS (PARTITION BY l.provider, l.order_key ORDER BY l.id)
), judged AS (
    SELECT wk.provider, wk.order_key, wk.id, wk.key_seq, unnest(ARRAY[
        CASE
            WHEN wk.prev_seq IS NOT NULL AND wk.key_seq <> wk.prev_seq + 1
                THEN format('seq %s logged after %s', wk.key_seq, wk.prev_seq)
            WHEN wk.nth = 1 AND $2::boolean AND wk.key_seq <> 1
                THEN format('log starts at seq %s, not 1', wk.key_seq)
        END,
        CASE
            WHEN wk.outcome = 'skipped'
                 AND NOT (wk.actor IS NOT NULL AND wk.note IS NOT NULL)
                 AND NOT EXISTS (SELECT 1 FROM dlq_webhooks d
                                 WHERE d.provider = wk.provider AND d.event_id = wk.event_id)
                THEN format('skipped seq %s (%s) has no operator and note and no dead letter',
                            wk.key_seq, coalesce(wk.event_id, 'no event'))
            WHEN wk.outcome = 'deferred' AND wk.resolution = 'parked'
                 AND NOT EXISTS (SELECT 1 FROM dlq_webhooks d
                                 WHERE d.provider = wk.provider AND d.event_id = wk.event_id)
                THEN format('deferred seq %s (%s) is parked but has no dead letter',
                            wk.key_seq, coalesce(wk.event_id, 'no event'))
            WHEN wk.outcome = 'deferred' AND wk.resolution IS NULL AND NOT $1::boolean
                 AND NOT EXISTS (SELECT 1 FROM dlq_webhooks d
                                 WHERE d.provider = wk.provider AND d.event_id = wk.event_id
                                   AND NOT d.is_resolved)
                THEN format('deferred seq %s (%s) was never settled or parked',
                            wk.key_seq, coalesce(wk.event_id, 'no event'))
        END,
        (SELECT format('seq %s names %s, which ingest numbered %s seq %s', wk.key_seq,
                       wk.event_id, coalesce(pw.order_key, '(no key)'),
                       coalesce(pw.key_seq::text, '(none)'))
         FROM processed_webhooks pw
         WHERE pw.provider = wk.provider AND pw.event_id = wk.event_id
           AND (pw.order_key IS DISTINCT FROM wk.order_key
                OR pw.key_seq IS DISTINCT FROM wk.key_seq))
    ]) AS problem
    FROM walked wk
), per_key AS (
    SELECT provider, order_key, max(key_seq) AS last_seq,
           array_agg(problem ORDER BY id) FILTER (WHERE problem IS NOT NULL) AS problems
    FROM judged
    GROUP BY provider, order_key
), keyed AS (
    SELECT coalesce(p.provider, a.provider) AS provider,
           coalesce(p.order_key, a.order_key) AS order_key,
           coalesce(p.problems, '{}') || ARRAY[
               CASE WHEN coalesce(p.last_seq, 0) <> coalesce(a.applied_seq, 0)
                   THEN format('log ends at seq %s but applied_seq is %s',
                               coalesce(p.last_seq, 0), coalesce(a.applied_seq, 0))
               END,
               CASE WHEN a.held_seq IS NOT NULL AND a.held_seq <= a.applied_seq
                   THEN format('hold at seq %s not released though applied_seq is %s',
                               a.held_seq, a.applied_seq)
               END,
               CASE WHEN a.held_seq IS NOT NULL AND NOT EXISTS (
                        SELECT 1 FROM dlq_webhooks d WHERE d.id = a.held_dlq_id)
                   THEN format('hold at seq %s names no dead letter (held_dlq_id %s)',
                               a.held_seq, coalesce(a.held_dlq_id::text, 'NULL'))
               END
           ] AS problems
    FROM per_key p FULL JOIN order_applied a USING (provider, order_key)
), flat AS (
    SELECT provider, order_key, array_remove(problems, NULL) AS problems FROM keyed
)
SELECT format('%s %s: %s%s', provider, order_key,
              array_to_string(problems[1:$3::int], '; '),
              CASE WHEN cardinality(problems) > $3::int
                   THEN format('; and %s more', cardinality(problems) - $3::int) ELSE '' END
       ) AS line
FROM flat
WHERE cardinality(problems) > 0
ORDER BY provider, order_key
"""

_SUMMARY = """
SELECT (SELECT count(*) FROM (SELECT provider, order_key FROM order_log
                              UNION SELECT provider, order_key FROM order_applied) k) AS keys,
       count(*) FILTER (WHERE outcome = 'applied') AS applied,
       count(*) FILTER (WHERE outcome = 'deferred') AS deferred,
       count(*) FILTER (WHERE outcome = 'skipped') AS skipped,
       (SELECT count(*) FROM order_applied WHERE held_seq IS NOT NULL) AS held,
       (SELECT count(*) FROM order_counters c
        LEFT JOIN order_applied a USING (provider, order_key)
        WHERE c.last_seq > coalesce(a.applied_seq, 0) AND a.held_seq IS NULL) AS behind
FROM order_log
"""


async def violations(conn: Conn, *, live: bool = False, from_one: bool = True) -> list[str]:
    """One line per key that breaks the ordering property; [] when it holds.

    `live`: the run is still going, so a deferral without a resolution is its event
    still in its retries, not a violation. `from_one`: each key's log starts at seq 1
    (pass False where retention may have removed a key's oldest log rows).
    """
    rows = await conn.fetch(_VIOLATIONS, live, from_one, _SHOWN_PER_KEY)
    return [str(r["line"]) for r in rows]


@dataclass(frozen=True)
class OrderingSummary:
    """What the property was checked over."""

    keys: int
    applied: int
    deferred: int
    skipped: int
    held: int
    behind: int  # keys, not held, whose last numbered event is not applied yet


async def summary(conn: Conn) -> OrderingSummary:
    row = await conn.fetchrow(_SUMMARY)
    if row is None:  # an aggregate always answers one row; this keeps mypy honest
        return OrderingSummary(0, 0, 0, 0, 0, 0)
    return OrderingSummary(
        int(row["keys"]),
        int(row["applied"]),
        int(row["deferred"]),
        int(row["skipped"]),
        int(row["held"]),
        int(row["behind"]),
    )
