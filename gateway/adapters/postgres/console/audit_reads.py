"""Reading the console's audit trail: a page by keyset (newest first, through
`console_audit_at`), and the rows of a window in order for the NDJSON export, read
through a server-side cursor so an export never holds the whole window in memory.
Every filter value is a bound parameter."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from gateway.adapters.postgres import Conn, translate_errors
from gateway.core.console.audit_search import AuditSearch, like_prefix
from gateway.core.keyset import Keyset

_COLUMNS = "id, at, actor, role, via, address, action, target, outcome, detail::text AS detail"
#: Rows fetched from the export's cursor per round trip.
EXPORT_BATCH_ROWS = 500


@dataclass(frozen=True)
class AuditRow:
    id: int
    at: datetime
    actor: str
    role: str | None
    via: str | None
    address: str | None
    action: str
    target: str | None
    outcome: str
    detail: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at.isoformat(),
            "actor": self.actor,
            "role": self.role,
            "via": self.via,
            "address": self.address,
            "action": self.action,
            "target": self.target,
            "outcome": self.outcome,
            "detail": self.detail,
        }


def _row(r: Any) -> AuditRow:
    values = dict(r)
    values["detail"] = orjson.loads(values["detail"])
    return AuditRow(**values)


def _where(s: AuditSearch) -> tuple[str, list[Any]]:
    args: list[Any] = [s.since, s.until]
    parts = ["at >= $1", "at < $2"]
    for column, value in (("actor", s.actor), ("action", s.action), ("target", s.target)):
        if value is None:
            continue
        pattern = like_prefix(value)
        args.append(value if pattern is None else pattern)
        op = "=" if pattern is None else "LIKE"
        parts.append(f"{column} {op} ${len(args)}")
    if s.outcome is not None:
        args.append(s.outcome)
        parts.append(f"outcome = ${len(args)}")
    return " AND ".join(parts), args


def page_sql(s: AuditSearch) -> tuple[str, list[Any]]:
    where, args = _where(s)
    if s.after is not None:
        args += [s.after.at, s.after.id]
        where += f" AND (at, id) < (${len(args) - 1}, ${len(args)})"
    args.append(s.limit + 1)
    sql = " ".join(
        ["SELECT", _COLUMNS, "FROM console_audit WHERE", where,
         "ORDER BY at DESC, id DESC LIMIT", f"${len(args)}"]
    )  # fmt: skip
    return sql, args


async def audit_page(conn: Conn, s: AuditSearch) -> tuple[list[AuditRow], Keyset | None]:
    """A page of the trail, newest first, and the keyset the next page starts after."""
    sql, args = page_sql(s)
    with translate_errors():
        records = await conn.fetch(sql, *args)
    rows = [_row(r) for r in records[: s.limit]]
    more = len(records) > s.limit
    return rows, Keyset(rows[-1].at, rows[-1].id) if more and rows else None


async def export_rows(conn: Conn, s: AuditSearch) -> AsyncIterator[AuditRow]:
    """Every row of the window that matches, oldest first. Run it inside a transaction
    (the server-side cursor lives in one)."""
    where, args = _where(s)
    sql = " ".join(["SELECT", _COLUMNS, "FROM console_audit WHERE", where, "ORDER BY at, id"])
    with translate_errors():
        cursor = conn.cursor(sql, *args, prefetch=EXPORT_BATCH_ROWS)
        async for record in cursor:
            yield _row(record)
