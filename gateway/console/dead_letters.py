"""The dead letters area: the list (`GET /console/dlq`: every filter of `gateway dlq
list`, keyset pages, "select all N matching"), the error class by stage matrix
(`/console/dlq/groups`), bulk resolve, the NDJSON export, and the list in the API
(`GET /console/api/v1/dlq`). One row's page and actions: `dead_letter_detail`.

Filters are read by `core.dlq.filters.filter_from_query`, which calls `build_filter`,
the code `gateway dlq list` reads its flags with; the rows come from the same WHERE
clause, in the same order (first_failed_at, id). A mistake in a filter is its one line,
on the page (400) or as problem+json.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.adapters.postgres import connection, transaction
from gateway.adapters.postgres.dead_letters import pages
from gateway.console import dead_letter_detail, dead_letter_export
from gateway.console.dead_letter_docs import parse_note, query_lists
from gateway.console.dead_letter_rows import for_role, list_docs
from gateway.console.guard import needs
from gateway.console.web import (
    Principal,
    audit,
    deps,
    problem,
    read_form,
    render,
)
from gateway.core.console.roles import Capability, can
from gateway.core.dlq.filters import FILTER_KEYS, DlqFilter, filter_from_query, filter_query
from gateway.core.dlq.pages import LIST_TIMEOUT_S, decode_cursor, encode_cursor, page_rows
from gateway.core.events.model import Stage
from gateway.core.operator_input import parse_ids
from gateway.errors import DlqUsageError, UsageError

#: The most rows one bulk resolve touches: more is narrowed first, or done in turns.
BULK_MAX_ROWS = 1_000


def _link(base: str, f: DlqFilter, **extra: str) -> str:
    return f"{base}?{urlencode([*filter_query(f), *extra.items()])}"


@needs(Capability.VIEW)
async def list_page(request: Request, principal: Principal) -> Response:
    params = query_lists(request.query_params.multi_items())
    form = {k: params.get(k, []) for k in FILTER_KEYS}
    context: dict[str, Any] = {
        "form": form,
        "stages": [s.value for s in Stage],
        "error": None,
        "page": None,
        "rows": [],
        "filter_fields": [],
        "can_operate": can(principal.role, Capability.OPERATE),
        "can_read": can(principal.role, Capability.READ_PAYLOADS),
        "message": request.query_params.get("done"),
    }
    console = deps(request)
    now = console.now()
    try:
        f = filter_from_query(now, params)
        after = decode_cursor(request.query_params.get("cursor"))
        limit = page_rows(request.query_params.get("limit"))
        async with connection(console.pool) as conn:
            page = await pages.list_page(conn, for_role(f, principal), after, limit, LIST_TIMEOUT_S)
    except DlqUsageError as exc:
        context["error"] = str(exc)
        return render(request, "dead_letters/list.html", context, status=400)
    context.update(
        page=page,
        rows=await list_docs(request, principal, page.rows, now, api=False),
        filter_fields=filter_query(f),
        first_link=_link("/console/dlq", f, limit=str(limit)),
        next_link=_link("/console/dlq", f, limit=str(limit), cursor=encode_cursor(page.next_after))
        if page.next_after
        else None,
        groups_link=_link("/console/dlq/groups", f),
        export_link=_link("/console/dlq/export.ndjson", f),
        export_payloads_link=_link("/console/dlq/export.ndjson", f, payloads="1"),
        replay_link=_link("/console/replays/new", f, kind="dlq"),
        paged=after is not None,
        open_only=f.resolved is False,
        bulk_max=BULK_MAX_ROWS,
    )
    return render(request, "dead_letters/list.html", context)


@needs(Capability.VIEW)
async def groups_page(request: Request, principal: Principal) -> Response:
    params = query_lists(request.query_params.multi_items())
    try:
        f = filter_from_query(deps(request).now(), params)
        async with connection(deps(request).pool) as conn:
            found = await pages.groups(conn, for_role(f, principal), LIST_TIMEOUT_S)
    except DlqUsageError as exc:
        return render(
            request,
            "dead_letters/groups.html",
            {
                "error": str(exc),
                "classes": [],
                "stages": [],
                "cells": {},
                "totals": {},
                "links": {},
                "list_link": "/console/dlq",
            },
            status=400,
        )
    stages = [s.value for s in Stage] + sorted({s for _, s, _ in found} - {s.value for s in Stage})
    classes = list(dict.fromkeys(c for c, _, _ in found))
    cells = {(c, s): n for c, s, n in found}
    links = {
        (c, s): _link("/console/dlq", replace(f, stages=(s,), error_classes=(c.upper(),)))
        for c, s in cells
    }
    totals = {c: sum(n for (cc, _), n in cells.items() if cc == c) for c in classes}
    context = {
        "error": None,
        "classes": classes,
        "stages": stages,
        "cells": cells,
        "links": links,
        "totals": totals,
        "list_link": _link("/console/dlq", f),
    }
    return render(request, "dead_letters/groups.html", context)


def _refused(request: Request, detail: str, back: str, status: int = 400) -> Response:
    return render(
        request,
        "dead_letters/refused.html",
        {"title": "Not resolved", "detail": detail, "back": back},
        status=status,
    )


async def _chosen(
    request: Request, form: dict[str, list[str]]
) -> tuple[list[int], DlqFilter | None]:
    """The rows a bulk form names: its ids, or every open row matching its filter."""
    scope = (form.get("scope") or [""])[0]
    if scope == "ids":
        try:
            ids = list(parse_ids(form.get("id", []), "id"))
        except UsageError as exc:
            raise DlqUsageError(str(exc)) from None
        if not ids:
            raise DlqUsageError("select the rows to resolve, or choose all matching")
        if len(ids) > BULK_MAX_ROWS:
            raise DlqUsageError(f"at most {BULK_MAX_ROWS:,} rows at once")
        return ids, None
    if scope != "filter":
        raise DlqUsageError("scope: ids or filter")
    f = replace(filter_from_query(deps(request).now(), form), resolved=False)
    async with connection(deps(request).pool) as conn:
        ids = await pages.matching_ids(conn, f, BULK_MAX_ROWS + 1)
    if len(ids) > BULK_MAX_ROWS:
        raise DlqUsageError(
            f"more than {BULK_MAX_ROWS:,} open rows match: narrow the filter, or resolve in turns"
        )
    return ids, f


@needs(Capability.OPERATE)
async def bulk_resolve(request: Request, principal: Principal) -> Response:
    form = query_lists(
        [(k, v) for k, v in (await read_form(request)).multi_items() if isinstance(v, str)]
    )
    back_filter = {k: v for k, v in form.items() if k in FILTER_KEYS}
    back = "/console/dlq?" + urlencode([(k, v) for k, vs in back_filter.items() for v in vs])
    try:
        note = parse_note((form.get("note") or [""])[0])
        ids, f = await _chosen(request, form)
    except DlqUsageError as exc:
        return _refused(request, str(exc), back)
    confirm = (form.get("confirm") or [""])[0].strip().replace(",", "")
    if confirm != str(len(ids)):
        return _refused(
            request,
            f"this resolves {len(ids):,} row(s): type {len(ids)} in the confirmation box to go on",
            back,
        )
    done = await _resolve_many(request, principal, ids, note, f)
    return RedirectResponse(f"{back}&done={done}" if "?" in back else f"{back}?done={done}", 303)


async def _resolve_many(
    request: Request, principal: Principal, ids: list[int], note: str, f: DlqFilter | None
) -> int:
    """Resolve the open rows among `ids`, each as a single resolve would (its audit row,
    its key released if it holds one), and one audit row for the bulk action: all in one
    transaction, so a failed audit write leaves every row as it was."""
    async with transaction(deps(request).pool) as conn:
        resolved = []
        for row_id in await pages.open_among(conn, ids):
            done, released = await pages.resolve_one(conn, row_id, note, principal.actor)
            if done:
                resolved.append(row_id)
                one = {"note": note, "released_key": released, "bulk": True}
                await audit(
                    request, principal, "dlq.resolve", f"dlq:{row_id}", detail=one, conn=conn
                )
        bulk = {
            "note": note,
            "asked": len(ids),
            "resolved": len(resolved),
            "ids": resolved,
            "filter": None if f is None else dict(query_lists(filter_query(f))),
        }
        await audit(request, principal, "dlq.resolve.bulk", "dlq", detail=bulk, conn=conn)
    return len(resolved)


@needs(Capability.VIEW)
async def api_list(request: Request, principal: Principal) -> Response:
    params = query_lists(request.query_params.multi_items())
    now = deps(request).now()
    try:
        f = filter_from_query(now, params)
        after = decode_cursor(request.query_params.get("cursor"))
        limit = page_rows(request.query_params.get("limit"))
        async with connection(deps(request).pool) as conn:
            page = await pages.list_page(conn, for_role(f, principal), after, limit, LIST_TIMEOUT_S)
    except DlqUsageError as exc:
        return problem(400, "Bad Request", str(exc))
    cursor = encode_cursor(page.next_after) if page.next_after else None
    items = await list_docs(request, principal, page.rows, now, api=True)
    return JSONResponse({"items": items, "next_cursor": cursor})


ROUTES: list[BaseRoute] = [
    Route("/console/dlq", list_page, methods=["GET"]),
    Route("/console/dlq/groups", groups_page, methods=["GET"]),
    Route("/console/dlq/resolve", bulk_resolve, methods=["POST"]),
    Route("/console/dlq/export.ndjson", dead_letter_export.export, methods=["GET"]),
    Route("/console/api/v1/dlq", api_list, methods=["GET"]),
    *dead_letter_detail.ROUTES,
]
