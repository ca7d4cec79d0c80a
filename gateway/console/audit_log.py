"""The audit trail: who did what, to what, with which outcome, filtered and paged by
keyset (newest first; VIEW), and its NDJSON export for a time window (ADMINISTER; the
export is itself audited before the first row leaves). HTML at /console/audit, JSON at
/console/api/v1/audit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from gateway.adapters.postgres import connection, transaction
from gateway.adapters.postgres.console.audit_reads import AuditRow, audit_page, export_rows
from gateway.console.guard import needs
from gateway.console.web import Principal, audit, deps, problem, render
from gateway.core.console.audit_search import (
    OUTCOMES,
    AuditSearch,
    AuditUsageError,
    parse_audit_search,
)
from gateway.core.console.roles import Capability, can
from gateway.core.keyset import encode_cursor


def _params(request: Request) -> dict[str, list[str]]:
    params: dict[str, list[str]] = {}
    for name, value in request.query_params.multi_items():
        params.setdefault(name, []).append(value)
    return params


async def _page(request: Request) -> tuple[AuditSearch, list[AuditRow], str | None]:
    """Raises `AuditUsageError` for filters that cannot be used."""
    console = deps(request)
    search = parse_audit_search(_params(request), console.now())
    async with connection(console.pool) as conn:
        rows, after = await audit_page(conn, search)
    return search, rows, None if after is None else encode_cursor(after)


@needs(Capability.VIEW)
async def audit_html(request: Request, principal: Principal) -> Response:
    q = request.query_params
    fields = ("actor", "action", "target", "outcome", "since", "until")
    context: dict[str, Any] = {
        "form": {name: q.get(name, "") for name in fields},
        "outcomes": OUTCOMES,
        "rows": [],
        "error": None,
        "search": None,
        "next_href": None,
        "export_href": None,
    }
    try:
        search, rows, cursor = await _page(request)
    except AuditUsageError as exc:
        context["error"] = str(exc)
        return render(request, "audit/list.html", context, status=400)
    pairs = search.query()
    context.update(rows=rows, search=search)
    if cursor is not None:
        context["next_href"] = "/console/audit?" + urlencode([*pairs, ("cursor", cursor)])
    if can(principal.role, Capability.ADMINISTER):
        context["export_href"] = "/console/audit/export.ndjson?" + urlencode(pairs)
    return render(request, "audit/list.html", context)


@needs(Capability.VIEW)
async def audit_api(request: Request, principal: Principal) -> Response:
    try:
        _, rows, cursor = await _page(request)
    except AuditUsageError as exc:
        return problem(400, "Bad Request", str(exc))
    return JSONResponse({"items": [r.to_json() for r in rows], "next_cursor": cursor})


@needs(Capability.ADMINISTER)
async def audit_export(request: Request, principal: Principal) -> Response:
    """Every matching row of the window, oldest first, one JSON document a line."""
    console = deps(request)
    try:
        search = parse_audit_search(_params(request), console.now())
    except AuditUsageError as exc:
        return problem(400, "Bad Request", str(exc))
    # The export is recorded before it starts: a failed audit write exports nothing.
    await audit(request, principal, "audit.export", "audit", detail=dict(search.query()))

    async def lines() -> AsyncIterator[bytes]:
        async with transaction(console.pool) as conn:
            async for row in export_rows(conn, search):
                yield orjson.dumps(row.to_json()) + b"\n"

    stamp = search.until.strftime("%Y%m%dT%H%M%SZ")
    return StreamingResponse(
        lines(),
        media_type="application/x-ndjson",
        headers={
            "Content-Disposition": f'attachment; filename="console-audit-{stamp}.ndjson"',
            "Cache-Control": "no-store",
        },
    )


ROUTES: list[BaseRoute] = [
    Route("/console/audit", audit_html, methods=["GET"]),
    Route("/console/audit/export.ndjson", audit_export, methods=["GET"]),
    Route("/console/api/v1/audit", audit_api, methods=["GET"]),
]
