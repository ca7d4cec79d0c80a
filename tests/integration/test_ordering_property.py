"""The ordering property's query (tests/support/ordering_property.py) against a real
PostgreSQL: hand-written logs that keep the property give no line, and each way of
breaking it gives a line naming the key and what is wrong."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import asyncpg
import pytest

from tests.support.ordering_property import summary, violations

P = "stripe"


@dataclass(frozen=True)
class Log:
    """One order_log row: (seq, outcome) plus the explaining columns."""

    seq: int
    outcome: str = "applied"
    event: str | None = None  # default: ev_{key}_{seq}
    actor: str | None = None
    note: str | None = None
    resolution: str | None = None


@dataclass(frozen=True)
class Key:
    """A key's log (inserted in this order, so `id` follows the list), its position and
    hold, and the events ingest recorded and the dead letters parked for it."""

    name: str
    log: list[Log]
    applied: int | None = None  # None: no order_applied row
    held: int | None = None
    held_dlq: str | None = None  # the event whose dead letter the hold names; "missing"
    events: dict[str, int] = field(default_factory=dict)  # event id -> key_seq ingest gave it
    dead: list[tuple[str, bool]] = field(default_factory=list)  # (event id, resolved)

    def event_id(self, log: Log) -> str:
        return log.event or f"ev_{self.name}_{log.seq}"


async def insert(conn: asyncpg.Connection, key: Key) -> None:
    for event_id, seq in key.events.items():
        await conn.execute(
            "INSERT INTO processed_webhooks (provider, event_id, event_type, subject, body,"
            " order_key, key_seq) VALUES ($1, $2, 't', 's', '\\x00', $3, $4)",
            P, event_id, key.name, seq,
        )  # fmt: skip
    dlq_ids: dict[str, int] = {}
    for event_id, resolved in key.dead:
        dlq_ids[event_id] = await conn.fetchval(
            "INSERT INTO dlq_webhooks (stage, provider, event_id, error_class, error_message,"
            " payload, is_resolved) VALUES ('settlement', $1, $2, 'X', 'why', '\\x00', $3)"
            " RETURNING id",
            P, event_id, resolved,
        )  # fmt: skip
    for row in key.log:
        await conn.execute(
            "INSERT INTO order_log (provider, order_key, key_seq, outcome, event_id, actor,"
            " note, resolution) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            P, key.name, row.seq, row.outcome, key.event_id(row), row.actor, row.note,
            row.resolution,
        )  # fmt: skip
    if key.applied is not None:
        held_dlq = None
        if key.held_dlq is not None:
            held_dlq = dlq_ids.get(key.held_dlq, 999_999_999)
        await conn.execute(
            "INSERT INTO order_applied (provider, order_key, applied_seq, held_seq, held_dlq_id,"
            " hold_reason, held_at) VALUES ($1, $2, $3, $4, $5, $6,"
            " CASE WHEN $4::bigint IS NULL THEN NULL ELSE now() END)",
            P, key.name, key.applied, key.held, held_dlq,
            None if key.held is None else "UNKNOWN_MERCHANT",
        )  # fmt: skip


@pytest.fixture
async def conn(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    c = await asyncpg.connect(database_url)
    yield c
    await c.close()


#: Every way a log may rightly look: in order, deferred then settled or parked, skipped by
#: an operator or by a dead letter, held behind a parked event, and a log whose events'
#: rows say the same key and sequence.
GOOD = [
    Key("k_plain", [Log(1), Log(2), Log(3)], applied=3, events={"ev_k_plain_2": 2}),
    Key(
        "k_explained",
        [
            Log(1),
            Log(2, "deferred", resolution="settled"),
            Log(3, "skipped", actor="alice", note="refund issued by hand"),
            Log(4, "skipped"),  # on_poison = "skip": its dead letter says why
            Log(5, "deferred", resolution="parked"),
        ],
        applied=5,
        dead=[("ev_k_explained_4", False), ("ev_k_explained_5", True)],
    ),
    Key(
        "k_held",
        [Log(1)],
        applied=1,
        held=2,
        held_dlq="ev_k_held_2",
        dead=[("ev_k_held_2", False)],
    ),
    Key(
        "k_deferred_parked_open",
        [Log(1, "deferred")],
        applied=1,
        dead=[("ev_k_deferred_parked_open_1", False)],
    ),
]


async def test_good_logs_keep_the_property(conn: asyncpg.Connection) -> None:
    """Every explained shape at once: no line, and the summary counts what was checked."""
    for key in GOOD:
        await insert(conn, key)
    assert await violations(conn) == []
    s = await summary(conn)
    assert (s.keys, s.applied, s.deferred, s.skipped, s.held, s.behind) == (4, 5, 3, 2, 1, 0)


async def test_an_empty_database_keeps_the_property(conn: asyncpg.Connection) -> None:
    """No keyed events at all (an unordered run): trivially true, zero keys checked."""
    assert await violations(conn) == []
    assert (await summary(conn)).keys == 0


# (what is wrong, the key, what the line must say)
BAD = [
    ("a gap", Key("k", [Log(1), Log(2), Log(4)], applied=4), "seq 4 logged after 2"),
    ("out of commit order", Key("k", [Log(1), Log(3), Log(2)], applied=3), "seq 3 logged after 1"),
    ("not from 1", Key("k", [Log(2), Log(3)], applied=3), "log starts at seq 2, not 1"),
    (
        "applied beyond the log",
        Key("k", [Log(1), Log(2)], applied=3),
        "log ends at seq 2 but applied_seq is 3",
    ),
    ("a log without a position", Key("k", [Log(1)]), "log ends at seq 1 but applied_seq is 0"),
    ("a position without a log", Key("k", [], applied=2), "log ends at seq 0 but applied_seq is 2"),
    (
        "a skip nobody explains",
        Key("k", [Log(1, "skipped")], applied=1),
        "skipped seq 1 (ev_k_1) has no operator and note and no dead letter",
    ),
    (
        "an operator's skip without a note",
        Key("k", [Log(1, "skipped", actor="alice")], applied=1),
        "skipped seq 1 (ev_k_1) has no operator and note",
    ),
    (
        "a deferral never resolved",
        Key("k", [Log(1, "deferred")], applied=1),
        "deferred seq 1 (ev_k_1) was never settled or parked",
    ),
    (
        "a deferral whose dead letter was resolved but the log not",
        Key("k", [Log(1, "deferred")], applied=1, dead=[("ev_k_1", True)]),
        "deferred seq 1 (ev_k_1) was never settled or parked",
    ),
    (
        "a deferral parked without a dead letter",
        Key("k", [Log(1, "deferred", resolution="parked")], applied=1),
        "deferred seq 1 (ev_k_1) is parked but has no dead letter",
    ),
    (
        "the log names another event than ingest numbered",
        Key("k", [Log(1), Log(2)], applied=2, events={"ev_k_1": 2}),
        "seq 1 names ev_k_1, which ingest numbered k seq 2",
    ),
    (
        "a hold left behind",
        Key("k", [Log(1), Log(2)], applied=2, held=2, held_dlq="e", dead=[("e", False)]),
        "hold at seq 2 not released though applied_seq is 2",
    ),
    (
        "a hold whose dead letter is gone",
        Key("k", [Log(1)], applied=1, held=2, held_dlq="missing"),
        "hold at seq 2 names no dead letter",
    ),
]


@pytest.mark.parametrize(("what", "key", "says"), BAD, ids=[b[0] for b in BAD])
async def test_each_violation_gives_its_key_a_line(
    conn: asyncpg.Connection, what: str, key: Key, says: str
) -> None:
    """One broken key among good ones: exactly one line, for that key, saying why."""
    for good in GOOD:
        await insert(conn, good)
    await insert(conn, key)
    lines = await violations(conn)
    assert len(lines) == 1, (what, lines)
    assert lines[0].startswith(f"{P} k: "), lines
    assert says in lines[0], (what, lines)


async def test_a_live_run_allows_open_deferrals(conn: asyncpg.Connection) -> None:
    """While the run goes on, a deferral's event may still be in its retries."""
    await insert(conn, Key("k", [Log(1, "deferred")], applied=1))
    assert await violations(conn, live=True) == []
    assert len(await violations(conn)) == 1


async def test_a_trimmed_log_may_start_later(conn: asyncpg.Connection) -> None:
    """from_one=False: where retention removed a key's oldest rows, the rest must still rise."""
    await insert(conn, Key("k", [Log(5), Log(6)], applied=6))
    await insert(conn, Key("g", [Log(5), Log(7)], applied=7))
    assert await violations(conn, from_one=False) == ["stripe g: seq 7 logged after 5"]


async def test_a_key_with_many_problems_is_one_line(conn: asyncpg.Connection) -> None:
    """Problems are listed in commit order, the first few spelled out and the rest counted."""
    await insert(conn, Key("k", [Log(1), *(Log(s, "skipped") for s in range(3, 12))], applied=9))
    (line,) = await violations(conn)
    assert line.startswith("stripe k: seq 3 logged after 1; skipped seq 3 (ev_k_3)"), line
    assert line.endswith("; and 6 more"), line


async def test_summary_counts_keys_behind_ingest(conn: asyncpg.Connection) -> None:
    """A key ingest numbered further than settlement applied is behind, unless it is held."""
    await insert(conn, Key("k_done", [Log(1), Log(2)], applied=2))
    await insert(conn, Key("k_behind", [Log(1)], applied=1))
    await insert(
        conn, Key("k_held", [Log(1)], applied=1, held=2, held_dlq="e", dead=[("e", False)])
    )
    await conn.executemany(
        "INSERT INTO order_counters (provider, order_key, last_seq) VALUES ($1, $2, $3)",
        [(P, "k_done", 2), (P, "k_behind", 3), (P, "k_held", 4), (P, "k_new", 1)],
    )
    s = await summary(conn)
    assert (s.keys, s.held, s.behind) == (3, 1, 2)  # k_behind, and k_new with nothing applied
