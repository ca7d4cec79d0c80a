"""One dead letter: its page (`GET /console/dlq/{id}`), its raw payload as a download,
resolving it by hand, and the same in the API (`/console/api/v1/dlq/{id}...`).

A viewer sees every field but the payload, the header values and the stack (which may
quote the payload; notices say why); an investigator or above sees them too, and each
view of a payload (the page, the download, the API's) writes a `payload.view` audit
row before the answer leaves, so a view that cannot be recorded is not shown. Answers
with a payload or a stack are sent `Cache-Control: no-store`. Resolving writes the
row's resolution (`resolved_by` = `console:<name>`, the note) and its audit row in one
transaction, and releases the row's key first when it holds one, as `gateway dlq
resolve` does.
"""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.adapters.postgres import connection, transaction
from gateway.adapters.postgres.dead_letters import pages
from gateway.adapters.postgres.dead_letters.rows import get_row
from gateway.console.dead_letter_docs import cli_commands, parse_note, payload_doc
from gateway.console.guard import needs
from gateway.console.web import (
    Principal,
    audit,
    deps,
    form_value,
    problem,
    read_body,
    read_form,
    render,
)
from gateway.core.console.roles import Capability, can
from gateway.core.dlq.columns import severity_of
from gateway.core.dlq.model import DlqRow
from gateway.core.dlq.public import row_doc
from gateway.core.dlq.view import masked_headers, payload_view, trace_id
from gateway.core.failures.runbook import runbook_entry
from gateway.core.operator_input import MAX_ROW_ID
from gateway.core.payload_text import message_quotes_payload, shown_message
from gateway.errors import DlqUsageError, ErrorClass


def _row_id(request: Request) -> int | None:
    value: int = request.path_params["id"]
    return value if 0 < value <= MAX_ROW_ID else None


async def _load(request: Request) -> DlqRow | None:
    row_id = _row_id(request)
    if row_id is None:
        return None
    async with connection(deps(request).pool) as conn:
        return await get_row(conn, row_id)


async def _viewed(request: Request, principal: Principal, row: DlqRow, how: str) -> None:
    """The `payload.view` audit row of a payload shown to `principal`."""
    detail = {"via": how, "size_bytes": len(row.payload)}
    await audit(request, principal, "payload.view", f"dlq:{row.id}", detail=detail)


def _not_found(request: Request, row_id: object) -> Response:
    return render(
        request,
        "dead_letters/refused.html",
        {
            "title": "No such dead letter",
            "detail": f"there is no dead letter {row_id}",
            "back": "/console/dlq",
        },
        status=404,
    )


@needs(Capability.VIEW)
async def detail_page(request: Request, principal: Principal) -> Response:
    row = await _load(request)
    if row is None:
        return _not_found(request, request.path_params["id"])
    shows_payload = can(principal.role, Capability.READ_PAYLOADS)
    async with connection(deps(request).pool) as conn:
        extras = await pages.extras(conn, row.id)
        near = []
        if extras and extras.order_key is not None and extras.key_seq is not None:
            near = await pages.neighbours(
                conn, row.id, row.provider, extras.order_key, extras.key_seq
            )
        trail = await pages.audit_trail(conn, f"dlq:{row.id}")
    if shows_payload:
        await _viewed(request, principal, row, "page")
    context = {
        "row": row,
        "extras": extras,
        "neighbours": near,
        "trail": trail,
        "trace_id": trace_id(row.headers, extras.traceparent if extras else None),
        "runbook": runbook_entry(row.error_class, row.stage),
        "known_class": row.error_class.upper() in ErrorClass.__members__,
        "shows_payload": shows_payload,
        # The stack may quote the payload: as the payload, for READ_PAYLOADS only.
        "stack": row.error_detail if shows_payload else None,
        "has_stack": bool(row.error_detail),
        # The message, too, may quote the payload (a settlement message names values).
        "severity": severity_of(row.error_class).value,
        "shown_message": shown_message(row.error_message, row.stage, reads_payloads=shows_payload),
        "view": payload_view(row.payload, removed=row.payload_removed_at is not None)
        if shows_payload
        else None,
        "headers": masked_headers(row.headers) if shows_payload else [],
        "header_names": sorted(row.headers, key=str.lower),
        "can_operate": can(principal.role, Capability.OPERATE),
        "commands": cli_commands(row.id, row.is_resolved),
        "message": request.query_params.get("done"),
    }
    return render(request, "dead_letters/detail.html", context, no_store=shows_payload)


@needs(Capability.READ_PAYLOADS)
async def payload_download(request: Request, principal: Principal) -> Response:
    row = await _load(request)
    if row is None:
        return _not_found(request, request.path_params["id"])
    if row.payload_removed_at is not None:
        return render(
            request,
            "dead_letters/refused.html",
            {
                "title": "Payload removed",
                "back": f"/console/dlq/{row.id}",
                "detail": "retention removed this row's payload; nothing is left to download",
            },
            status=410,
        )
    await _viewed(request, principal, row, "download")
    return Response(
        row.payload,
        media_type="application/octet-stream",
        headers={
            "Content-Disposition": f'attachment; filename="dead-letter-{row.id}.bin"',
            "Cache-Control": "no-store",
        },
    )


async def _resolve(
    request: Request, principal: Principal, row_id: int, note: str
) -> tuple[bool, bool]:
    """(resolved, released its key); the audit row in the same transaction."""
    async with transaction(deps(request).pool) as conn:
        done, released = await pages.resolve_one(conn, row_id, note, principal.actor)
        if done:
            detail = {"note": note, "released_key": released}
            await audit(
                request, principal, "dlq.resolve", f"dlq:{row_id}", detail=detail, conn=conn
            )
    return done, released


@needs(Capability.OPERATE)
async def resolve_from_form(request: Request, principal: Principal) -> Response:
    row = await _load(request)
    if row is None:
        return _not_found(request, request.path_params["id"])
    back = f"/console/dlq/{row.id}"
    try:
        note = parse_note(form_value(await read_form(request), "note"))
    except DlqUsageError as exc:
        return render(
            request,
            "dead_letters/refused.html",
            {"title": "Not resolved", "detail": str(exc), "back": back},
            status=400,
        )
    done, released = await _resolve(request, principal, row.id, note)
    if not done:
        return render(
            request,
            "dead_letters/refused.html",
            {
                "title": "Not resolved",
                "back": back,
                "detail": f"dead letter {row.id} is already resolved; left as it was",
            },
            status=409,
        )
    return RedirectResponse(f"{back}?done={'released' if released else 'resolved'}", 303)


@needs(Capability.VIEW)
async def api_detail(request: Request, principal: Principal) -> Response:
    row = await _load(request)
    if row is None:
        return problem(404, "Not Found", f"there is no dead letter {request.path_params['id']}")
    with_stack = can(principal.role, Capability.READ_PAYLOADS)
    headers = {"Cache-Control": "no-store"} if with_stack else None
    quotes = bool(row.error_message) and message_quotes_payload(row.stage)
    if with_stack and (row.error_detail or quotes):
        # The stack and the message may quote the payload: read through the API, they
        # are audited as the page's view of them is.
        await _viewed(request, principal, row, "api:stack" if row.error_detail else "api:message")
    return JSONResponse(row_doc(row, reads_payloads=with_stack), headers=headers)


@needs(Capability.READ_PAYLOADS)
async def api_payload(request: Request, principal: Principal) -> Response:
    row = await _load(request)
    if row is None:
        return problem(404, "Not Found", f"there is no dead letter {request.path_params['id']}")
    await _viewed(request, principal, row, "api")
    return JSONResponse(payload_doc(row), headers={"Cache-Control": "no-store"})


@needs(Capability.OPERATE)
async def api_resolve(request: Request, principal: Principal) -> Response:
    row = await _load(request)
    if row is None:
        return problem(404, "Not Found", f"there is no dead letter {request.path_params['id']}")
    try:
        body = json.loads(await read_body(request) or b"null")
    except ValueError:
        return problem(400, "Bad Request", "the body is not JSON")
    if not isinstance(body, dict) or not isinstance(body.get("note"), str):
        return problem(400, "Bad Request", 'the body must be {"note": "what was done"}')
    try:
        note = parse_note(body["note"])
    except DlqUsageError as exc:
        return problem(400, "Bad Request", str(exc))
    done, released = await _resolve(request, principal, row.id, note)
    if not done:
        return problem(409, "Conflict", f"dead letter {row.id} is already resolved")
    return JSONResponse(
        {
            "id": row.id,
            "resolution": "manual",
            "note": note,
            "resolved_by": principal.actor,
            "released_key": released,
        }
    )


ROUTES: list[BaseRoute] = [
    Route("/console/dlq/{id:int}", detail_page, methods=["GET"]),
    Route("/console/dlq/{id:int}/payload", payload_download, methods=["GET"]),
    Route("/console/dlq/{id:int}/resolve", resolve_from_form, methods=["POST"]),
    Route("/console/api/v1/dlq/{id:int}", api_detail, methods=["GET"]),
    Route("/console/api/v1/dlq/{id:int}/payload", api_payload, methods=["GET"]),
    Route("/console/api/v1/dlq/{id:int}/resolve", api_resolve, methods=["POST"]),
]
