"""The console's held-keys list: held keys oldest hold first, a page at a time by the
keyset (held_at, provider, order_key), through the partial index
`order_applied_held_idx`; the same rows `gateway ordering keys --held` lists."""

from __future__ import annotations

from gateway.adapters.postgres import Conn, translate_errors
from gateway.core.keyset import KeyKeyset
from gateway.core.ordering.admin import KeyListing

_HELD_PAGE = """
SELECT a.provider, a.order_key, a.applied_seq, c.last_seq, c.touched_at, a.progressed_at,
       a.held_seq, a.held_dlq_id, a.hold_reason, a.held_at
FROM order_applied a
LEFT JOIN order_counters c ON c.provider = a.provider AND c.order_key = a.order_key
WHERE a.held_at IS NOT NULL AND ($1::text IS NULL OR a.provider = $1)
  AND ($2::timestamptz IS NULL OR (a.held_at, a.provider, a.order_key) > ($2, $3, $4))
ORDER BY a.held_at, a.provider, a.order_key
LIMIT $5
"""


async def held_keys(
    conn: Conn, *, provider: str | None, after: KeyKeyset | None, limit: int
) -> tuple[list[KeyListing], KeyKeyset | None]:
    """A page of held keys, oldest hold first, and where the next page starts."""
    at, p, k = (after.at, after.provider, after.order_key) if after else (None, None, None)
    with translate_errors():
        records = await conn.fetch(_HELD_PAGE, provider, at, p, k, limit + 1)
    keys = [
        KeyListing(
            provider=r["provider"],
            order_key=r["order_key"],
            applied_seq=int(r["applied_seq"]),
            last_seq=None if r["last_seq"] is None else int(r["last_seq"]),
            touched_at=r["touched_at"],
            progressed_at=r["progressed_at"],
            held_seq=r["held_seq"],
            held_dlq_id=r["held_dlq_id"],
            hold_reason=r["hold_reason"],
            held_at=r["held_at"],
        )
        for r in records[:limit]
    ]
    if len(records) <= limit or not keys:
        return keys, None
    last = keys[-1]
    if last.held_at is None:  # the WHERE clause keeps held rows only
        raise RuntimeError("a held key without its hold time")
    return keys, KeyKeyset(last.held_at, last.provider, last.order_key)
