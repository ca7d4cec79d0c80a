"""`GET /console/dlq/export.ndjson`: the rows a filter of the list chooses, one JSON
document a line, streamed in keyset batches (never the whole result in memory).

Two exports, two capabilities:

- metadata only (the default): every stored field but the payload, the headers and
  the stack (`error_detail`, which may quote the event), what the list and a viewer's
  detail page show. It needs VIEW and changes nothing, so it writes no audit row.
- `payloads=1`: also the stack, the payload (base64) and the headers (secret values
  masked, as on the detail page). It needs READ_PAYLOADS, and writes one
  `payload.view` audit row (target `dlq:export`, with the filter) before the first
  line is sent.

An export stops after `EXPORT_MAX_ROWS` rows; its last line is then
`{"truncated": true, "next_cursor": ...}`, and the same URL with `cursor=` goes on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from gateway.adapters.postgres import connection
from gateway.adapters.postgres.dead_letters import pages
from gateway.console.dead_letter_docs import export_doc, query_lists
from gateway.console.dead_letter_rows import for_role
from gateway.console.guard import needs
from gateway.console.web import Principal, audit, deps, render, require
from gateway.core.console.roles import Capability
from gateway.core.dlq.filters import DlqFilter, filter_query
from gateway.core.dlq.filters import filter_from_query as read_filter
from gateway.core.dlq.pages import decode_cursor, encode_cursor
from gateway.core.keyset import Keyset
from gateway.errors import DlqUsageError

EXPORT_MAX_ROWS = 100_000
#: Rows read per round trip: a connection is held for one batch, not the whole export.
#: A metadata row is a few KB (its message is at most 2,000 characters): 500 of them,
#: under 2 MB.
BATCH_ROWS = 500
#: The most payload bytes one batch of the export with payloads holds: 500 payloads of
#: up to 1 MiB each would be 500 MiB (and their base64). A batch takes the rows whose
#: payloads fit (one alone when it is larger), each line's base64 made one at a time.
BATCH_PAYLOAD_BYTES = 16 << 20


async def _lines(
    request: Request, f: DlqFilter, after: Keyset | None, payloads: bool
) -> AsyncIterator[bytes]:
    pool = deps(request).pool
    sent = 0
    while sent < EXPORT_MAX_ROWS:
        want = min(BATCH_ROWS, EXPORT_MAX_ROWS - sent)
        async with connection(pool) as conn:
            if payloads:
                batch = await pages.stream_rows_with_payloads(
                    conn, f, after, want, budget_bytes=BATCH_PAYLOAD_BYTES
                )
            else:
                batch = await pages.stream_rows(conn, f, after, want)
        if not batch:
            return
        for record in batch:
            yield orjson.dumps(export_doc(record)) + b"\n"
        sent += len(batch)
        # A short metadata batch is the last; one with payloads may be short by its bytes.
        if len(batch) < want and not payloads:
            return
        after = Keyset(batch[-1]["first_failed_at"], batch[-1]["id"])
    if after is not None:
        # There may be more: say where to go on rather than end as if complete.
        yield orjson.dumps({"truncated": True, "next_cursor": encode_cursor(after)}) + b"\n"


@needs(Capability.VIEW)
async def export(request: Request, principal: Principal) -> Response:
    """Every role exports the rows; with `payloads=1`, their bodies too (READ_PAYLOADS)."""
    payloads = request.query_params.get("payloads", "").lower() in ("1", "true", "yes", "on")
    if payloads:
        await require(request, Capability.READ_PAYLOADS)
    try:
        f = read_filter(deps(request).now(), query_lists(request.query_params.multi_items()))
        after = decode_cursor(request.query_params.get("cursor"))
    except DlqUsageError as exc:
        return render(
            request,
            "dead_letters/refused.html",
            {"title": "Not exported", "detail": str(exc), "back": "/console/dlq"},
            status=400,
        )
    headers = {"Content-Disposition": 'attachment; filename="dead-letters.ndjson"'}
    if payloads:
        detail = {"via": "export", "filter": query_lists(filter_query(f))}
        await audit(request, principal, "payload.view", "dlq:export", detail=detail)
        headers["Cache-Control"] = "no-store"
    return StreamingResponse(
        _lines(request, for_role(f, principal), after, payloads),
        media_type="application/x-ndjson",
        headers=headers,
    )
