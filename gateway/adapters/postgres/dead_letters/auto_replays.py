"""The SQL of the dead letters' automatic re-drive: the round's candidates, one process's
turn at a round, and each automatic replay's count and audit row."""

from __future__ import annotations

from collections.abc import Sequence

from gateway.adapters.postgres import Conn, translate_errors
from gateway.adapters.postgres.console.audit import record
from gateway.adapters.postgres.dead_letters.rows import replay_order
from gateway.core.dlq.auto_replay import Candidate

#: One process at a time runs a round: two `run-jobs` processes re-driving the same row
#: at once would each count one automatic replay and could pass `auto_replay_max`.
#: (Any constant: it only has to be the same in every process.)
ROUND_LOCK_KEY = 0x6761746577617932

#: The audit trail's actor for what the gateway did by itself.
ACTOR = "gateway:auto-replay"
ACTION = "dlq.replay"

# The open rows of the configured classes and replayable stages whose automatic replays
# are not spent, in the order a replay claims rows (each key's rows in key order).
# The backoff is the pure decision's (`core.dlq.auto_replay.is_due`); the LIMIT leaves it
# room: rows waiting out a backoff come first only when they are older.
_CANDIDATES = (
    "SELECT id, error_class, auto_replays, last_auto_replay_at FROM dlq_webhooks"  # noqa: S608 (fixed text)
    " WHERE NOT is_resolved AND error_class = ANY($1::text[]) AND stage = ANY($2::text[])"
    " AND auto_replays < $3 AND payload_removed_at IS NULL "
    + replay_order(ordered=True)
    + " LIMIT $4"
)


async def candidates(
    conn: Conn, classes: Sequence[str], stages: Sequence[str], max_per_row: int, limit: int
) -> list[Candidate]:
    """The rows a round may consider, in replay order, at most `limit`."""
    with translate_errors():
        records = await conn.fetch(_CANDIDATES, list(classes), list(stages), max_per_row, limit)
    return [Candidate(**dict(r)) for r in records]


async def try_round_lock(conn: Conn) -> bool:
    """Take the round's lock for this session (False: another process runs a round)."""
    with translate_errors():
        return bool(await conn.fetchval("SELECT pg_try_advisory_lock($1)", ROUND_LOCK_KEY))


async def release_round_lock(conn: Conn) -> None:
    with translate_errors():
        await conn.execute("SELECT pg_advisory_unlock($1)", ROUND_LOCK_KEY)


async def record_auto_replay(
    conn: Conn,
    row_id: int,
    error_class: str,
    outcome: str,
    new_error_class: str | None,
    message: str | None,
) -> None:
    """Count one automatic replay of the row and audit it (`via = 'auto'`), inside the
    transaction that holds the row's lock and records the replay's outcome."""
    with translate_errors():
        await conn.execute(
            "UPDATE dlq_webhooks SET auto_replays = auto_replays + 1,"
            " last_auto_replay_at = clock_timestamp() WHERE id = $1",
            row_id,
        )
    detail: dict[str, object] = {"error_class": error_class, "outcome": outcome}
    if new_error_class is not None:
        detail["new_error_class"] = new_error_class
    if message is not None:
        detail["message"] = message
    await record(
        conn,
        actor=ACTOR,
        role=None,
        via="auto",
        address=None,
        action=ACTION,
        target=f"dlq:{row_id}",
        outcome="ok" if outcome == "replayed" else "failed",
        detail=detail,
    )
