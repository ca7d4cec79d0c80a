"""The event log: accepted events found with `gateway events list`'s filters inside a
required window (at most 31 days), a page at a time by keyset; one event's publish and
settlement state, its key's place and its dead letters; its payload, what settlement
read from it, and searches by payload content (`contains`) for investigators and above,
each audited. HTML at /console/events, JSON at /console/api/v1/events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.adapters.postgres import connection, transaction
from gateway.adapters.postgres.console.events import search_events
from gateway.console.event_pages import (
    PUBLISH_MEANING,
    EventDetail,
    dead_letter_docs,
    detail_doc,
    event_detail,
    replay_link,
    settlement_doc,
)
from gateway.console.guard import needs
from gateway.console.web import Principal, audit, deps, is_htmx, problem, render, require
from gateway.core.console.roles import Capability, can
from gateway.core.dlq.view import masked_headers, payload_view, trace_id
from gateway.core.events.model import Source
from gateway.core.events.public import brief_doc
from gateway.core.events.rows import EventBrief
from gateway.core.events.search import EventSearch, PublishState, parse_event_search
from gateway.core.keyset import Keyset, encode_cursor
from gateway.core.operator_input import parse_ids
from gateway.errors import EventsUsageError, UsageError


def query_params(request: Request) -> dict[str, list[str]]:
    """The query string, every value of every name (filters repeat)."""
    params: dict[str, list[str]] = {}
    for name, value in request.query_params.multi_items():
        params.setdefault(name, []).append(value)
    return params


def _asks_contains(params: Mapping[str, Sequence[str]]) -> bool:
    """Whether the search matches bodies (`contains`; a blank form field means "any")."""
    return any(v.strip() for v in params.get("contains", ()))


async def _require_search(request: Request, params: Mapping[str, Sequence[str]]) -> None:
    """Every role lists events (the route needs VIEW), but a containment search says
    whether bodies hold a value, so it reads payloads (refused before it is parsed)."""
    if _asks_contains(params):
        await require(request, Capability.READ_PAYLOADS)


async def _run(
    request: Request, principal: Principal, search: EventSearch
) -> tuple[list[EventBrief], Keyset | None]:
    """A page of the search. A containment search is audited as
    `events.search_payloads` in the transaction that runs it (a failed audit write
    answers nothing); a search without one reads no body and writes nothing."""
    pool = deps(request).pool
    if search.contains is None:
        async with connection(pool) as conn:
            return await search_events(conn, search)
    async with transaction(pool) as conn:
        found = await search_events(conn, search)
        filter_doc: dict[str, list[str]] = {}
        for name, value in search.query():
            filter_doc.setdefault(name, []).append(value)
        detail = {"via": _via(request), "filter": filter_doc}
        await audit(
            request, principal, "events.search_payloads", "events", detail=detail, conn=conn
        )
    return found


def _via(request: Request) -> str:
    return "api" if request.url.path.startswith("/console/api/") else "page"


def _form(params: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """The filter fields as typed, to fill the form in again."""
    names = ("provider", "type", "since", "until", "id", "event_id", "source", "state")
    filled = {n: ", ".join(v for v in params.get(n, ()) if v) for n in names}
    filled["contains"] = next(iter(params.get("contains", ())), "")
    return filled


def _split(params: dict[str, list[str]]) -> dict[str, list[str]]:
    """A form field may hold several values separated by commas (`stripe, github`)."""
    out = dict(params)
    for name in ("provider", "type", "id", "event_id"):
        if name in out:
            out[name] = [p.strip() for v in out[name] for p in v.split(",") if p.strip()]
    return out


@needs(Capability.VIEW)
async def events_page(request: Request, principal: Principal) -> Response:
    params = query_params(request)
    await _require_search(request, params)
    console = deps(request)
    context: dict[str, Any] = {
        "form": _form(params),
        "searches_payloads": can(principal.role, Capability.READ_PAYLOADS),
        "states": [s.value for s in PublishState],
        "sources": [s.value for s in Source],
        "meaning": PUBLISH_MEANING,
        "rows": [],
        "next_href": None,
        "error": None,
        "search": None,
        "replay_all_href": None,
        "replay_page_href": None,
    }
    try:
        search = parse_event_search(_split(params), console.now())
        rows, after = await _run(request, principal, search)
    except EventsUsageError as exc:
        context["error"] = str(exc)
        return render(request, "events/list.html", context, status=400)
    pairs = search.query()
    context.update(rows=rows, search=search)
    if after is not None:
        context["next_href"] = _href("/console/events", [*pairs, ("cursor", encode_cursor(after))])
    if can(principal.role, Capability.OPERATE):
        if search.state is None and search.contains is None:
            # The planner replays by `gateway events replay`'s filters, which have no
            # state or containment: with those, only the rows shown can be carried.
            context["replay_all_href"] = replay_link(pairs)
        if rows:
            context["replay_page_href"] = replay_link([("id", str(r.id)) for r in rows])
    template = "events/_rows.html" if is_htmx(request) else "events/list.html"
    return render(request, template, context)


def _href(path: str, pairs: list[tuple[str, str]]) -> str:
    return f"{path}?{urlencode(pairs)}"


def _row_id(request: Request) -> int | None:
    try:
        (row_id,) = parse_ids([request.path_params["id"]], "id")
    except UsageError:
        return None
    return row_id


async def _detail(request: Request, principal: Principal) -> tuple[EventDetail | None, bool]:
    """The event and whether its payload is shown (audited as `payload.view` in the
    transaction that reads it: a failed audit write shows nothing)."""
    console = deps(request)
    row_id = _row_id(request)
    if row_id is None:
        return None, False
    shows = can(principal.role, Capability.READ_PAYLOADS)
    async with transaction(console.pool) as conn:
        detail = await event_detail(conn, console.settings.providers, row_id)
        if detail is not None and shows:
            via = {"via": _via(request)}
            await audit(
                request, principal, "payload.view", f"event:{row_id}", detail=via, conn=conn
            )
    return detail, shows


@needs(Capability.VIEW)
async def event_page(request: Request, principal: Principal) -> Response:
    detail, shows = await _detail(request, principal)
    if detail is None:
        missing = {"detail": f"no accepted event with id {request.path_params['id']!r}"}
        return render(request, "events/missing.html", missing, status=404)
    row = detail.row
    context: dict[str, Any] = {
        "d": detail,
        "e": row.brief,
        "settlement": settlement_doc(detail.settlement, with_payload=shows),
        "dead_letters": dead_letter_docs(detail, with_payload=shows),
        "meaning": PUBLISH_MEANING,
        "shows_payload": shows,
        "trace_id": trace_id(row.headers),
        "header_names": sorted(row.headers),
        "headers": masked_headers(row.headers) if shows else [],
        "view": payload_view(row.body, removed=row.brief.payload_removed_at is not None)
        if shows
        else None,
        "replay_href": replay_link([("id", str(row.brief.id))])
        if can(principal.role, Capability.OPERATE)
        else None,
    }
    return render(request, "events/detail.html", context, no_store=shows)


@needs(Capability.VIEW)
async def api_events(request: Request, principal: Principal) -> Response:
    params = query_params(request)
    await _require_search(request, params)
    try:
        search = parse_event_search(params, deps(request).now())
        rows, after = await _run(request, principal, search)
    except EventsUsageError as exc:
        return problem(400, "Bad Request", str(exc))
    cursor = None if after is None else encode_cursor(after)
    return JSONResponse({"items": [brief_doc(r) for r in rows], "next_cursor": cursor})


@needs(Capability.VIEW)
async def api_event(request: Request, principal: Principal) -> Response:
    detail, shows = await _detail(request, principal)
    if detail is None:
        return problem(404, "Not Found", f"no accepted event with id {request.path_params['id']!r}")
    headers = {"Cache-Control": "no-store"} if shows else None
    return JSONResponse(detail_doc(detail, with_payload=shows), headers=headers)


ROUTES: list[BaseRoute] = [
    Route("/console/events", events_page, methods=["GET"]),
    Route("/console/events/{id}", event_page, methods=["GET"]),
    Route("/console/api/v1/events", api_events, methods=["GET"]),
    Route("/console/api/v1/events/{id}", api_event, methods=["GET"]),
]
