"""The SQL behind `gateway events`: accepted events (`processed_webhooks`) listed, shown
and read back for a replay. Filter values are always bound parameters."""

from __future__ import annotations

from typing import Any

import asyncpg
import orjson

from gateway.adapters.postgres import Conn, translate_errors
from gateway.core.events.filters import EventFilter
from gateway.core.events.rows import EventBrief, EventRow

# Whether the event reached the stream, by the outbox's one definition (sql/010).
_BRIEF_COLUMNS = """id, provider, event_id, event_type, subject, source, received_at,
       CASE WHEN subject IS NULL THEN 'no subject'
            WHEN publish_parked_at IS NOT NULL THEN 'parked'
            WHEN outbox_holds(processed_webhooks) THEN 'waiting'
            ELSE 'published' END AS publish_state,
       payload_removed_at"""
_FULL_COLUMNS = (
    f"{_BRIEF_COLUMNS}, headers::text AS headers, body, publish_attempts, order_key, key_seq"
)


def _brief(r: asyncpg.Record) -> EventBrief:
    return EventBrief(*(r[k] for k in EventBrief.__dataclass_fields__))


def _row(r: asyncpg.Record) -> EventRow:
    return EventRow(
        _brief(r),
        orjson.loads(r["headers"]),
        bytes(r["body"]),
        r["publish_attempts"],
        r["order_key"],
        r["key_seq"],
    )


def _where(f: EventFilter, after_id: int | None = None) -> tuple[str, list[Any]]:
    """A WHERE clause from this module's fixed fragments; every value a parameter."""
    parts: list[str] = ["true"]
    args: list[Any] = []

    def add(fragment: str, value: Any) -> None:
        args.append(value)
        parts.append(fragment.format(f"${len(args)}"))

    if f.providers:
        add("provider = ANY({}::text[])", list(f.providers))
    if f.types:
        exact = [t.text for t in f.types if not t.is_prefix]
        # A prefix as a LIKE pattern: its own % and _ (and the escape) taken literally.
        prefixes = [
            t.prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            for t in f.types
            if t.is_prefix
        ]
        args += [exact, prefixes]
        parts.append(
            f"(event_type = ANY(${len(args) - 1}::text[]) "
            f"OR event_type LIKE ANY(${len(args)}::text[]))"
        )
    if f.since is not None:
        add("received_at >= {}", f.since)
    if f.until is not None:
        add("received_at < {}", f.until)
    if f.ids:
        add("id = ANY({}::bigint[])", list(f.ids))
    if f.event_ids:
        add("event_id = ANY({}::text[])", list(f.event_ids))
    if f.source is not None:
        add("source = {}", f.source)
    if after_id is not None:
        add("id > {}", after_id)
    return " AND ".join(parts), args


#: The same columns, WHERE clause and rows for the console's event log, which adds its
#: own conditions after these (numbering its parameters on from `len(args)`).
BRIEF_COLUMNS = _BRIEF_COLUMNS
where_clause = _where
brief_of = _brief


def _statement(columns: str, where: str, tail: str = "") -> str:
    """`SELECT columns FROM processed_webhooks WHERE where tail`, from fixed fragments."""
    return " ".join(["SELECT", columns, "FROM processed_webhooks WHERE", where, tail])


async def list_events(conn: Conn, f: EventFilter, limit: int) -> tuple[list[EventBrief], bool]:
    """The newest matching events, up to `limit`, newest first; and whether more match.

    No total: counting every match of a broad filter would read the whole table.
    """
    where, args = _where(f)
    sql = _statement(
        _BRIEF_COLUMNS, where, f"ORDER BY received_at DESC, id DESC LIMIT ${len(args) + 1}"
    )
    with translate_errors():
        records = await conn.fetch(sql, *args, limit + 1)
    return [_brief(r) for r in records[:limit]], len(records) > limit


async def get_event(conn: Conn, row_id: int) -> EventRow | None:
    """The row with this id, with its headers and body; None if there is none."""
    with translate_errors():
        record = await conn.fetchrow(_statement(_FULL_COLUMNS, "id = $1"), row_id)
    return None if record is None else _row(record)


async def count_events(conn: Conn, f: EventFilter, limit: int | None) -> int:
    """How many rows match (at most `limit`): what a replay's progress bar counts to."""
    where, args = _where(f)
    tail = ""
    if limit is not None:
        args.append(limit)
        tail = f"LIMIT ${len(args)}"
    sql = " ".join(["SELECT count(*) FROM (", _statement("1", where, tail), ") AS matched"])
    with translate_errors():
        return int(await conn.fetchval(sql, *args))


async def page_events(conn: Conn, f: EventFilter, after_id: int, size: int) -> list[EventRow]:
    """The next `size` matching rows after row `after_id`, in id order (that is, in the
    order they were recorded), with bodies: a replay reads the table this way, a page at
    a time, never holding more than one page."""
    where, args = _where(f, after_id)
    sql = _statement(_FULL_COLUMNS, where, f"ORDER BY id LIMIT ${len(args) + 1}")
    with translate_errors():
        records = await conn.fetch(sql, *args, size)
    return [_row(r) for r in records]


async def missing_ids(conn: Conn, ids: tuple[int, ...]) -> list[int]:
    """Which of these row ids have no row."""
    if not ids:
        return []
    with translate_errors():
        records = await conn.fetch(
            "SELECT id FROM processed_webhooks WHERE id = ANY($1::bigint[])", list(ids)
        )
    found = {int(r["id"]) for r in records}
    return [i for i in ids if i not in found]


async def event_briefs(conn: Conn, f: EventFilter, limit: int) -> list[EventBrief]:
    """The accepted events `f` matches, at most `limit`, in the order `replay_events`
    publishes them (id, the order they were recorded), without their bodies: what the
    console's replay planner shows, and a replay job's items are made of."""
    where, args = _where(f)
    sql = " ".join(
        [
            "SELECT",
            _BRIEF_COLUMNS,
            "FROM processed_webhooks WHERE",
            where,
            f"ORDER BY id LIMIT ${len(args) + 1}",
        ]
    )
    with translate_errors():
        records = await conn.fetch(sql, *args, limit)
    return [_brief(r) for r in records]
