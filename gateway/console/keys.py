"""Held ordering keys: the list (oldest hold first, as `gateway ordering keys --held`),
and releasing one (operator): the blocking dead letter resolved by hand with the note,
its number skipped, the hold cleared, as `gateway ordering release` does, and the audit
row written in the same transaction. HTML at /console/keys, JSON at
/console/api/v1/keys: a key and a release as `gateway ordering keys --json` and
`gateway ordering release --json` print them (`core.ordering.public`)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.adapters.postgres import connection, transaction
from gateway.adapters.postgres.console.keys import held_keys
from gateway.adapters.postgres.ordering.admin import release_key
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
from gateway.core.events.search import parse_limit
from gateway.core.keyset import BadCursor, KeyKeyset, decode_key_cursor, encode_key_cursor
from gateway.core.ordering.admin import KeyListing, Release, check_note, release_line
from gateway.core.ordering.public import key_doc, release_doc
from gateway.errors import EventsUsageError, OrderingUsageError, OrderKeyNotFound

#: A provider name or key longer than this is not one ingest kept (keys are at most
#: 200 bytes).
_NAME_MAX_CHARS = 400


class _Refusal(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


async def _page(request: Request) -> tuple[list[KeyListing], str | None, str | None]:
    """(keys, next cursor, provider filter); raises `_Refusal` for a bad query."""
    q = request.query_params
    provider = q.get("provider", "").strip() or None
    try:
        limit = parse_limit(q.get("limit") or None)
        cursor = q.get("cursor", "")
        after: KeyKeyset | None = decode_key_cursor(cursor) if cursor else None
    except (EventsUsageError, BadCursor) as exc:
        raise _Refusal(400, str(exc)) from None
    async with connection(deps(request).pool) as conn:
        keys, last = await held_keys(conn, provider=provider, after=after, limit=limit)
    return keys, None if last is None else encode_key_cursor(last), provider


@needs(Capability.VIEW)
async def keys_page(request: Request, principal: Principal) -> Response:
    return await _keys_response(request, principal)


async def _keys_response(
    request: Request, principal: Principal, status: int = 200, **extra: Any
) -> Response:
    now = deps(request).now()
    context: dict[str, Any] = {
        "keys": [],
        "docs": [],
        "next_href": None,
        "provider": request.query_params.get("provider", ""),
        "can_release": can(principal.role, Capability.OPERATE),
        "error": None,
        "done": request.query_params.get("released", ""),
        "form": {"provider": "", "key": "", "note": ""},
    }
    context.update(extra)
    try:
        keys, cursor, provider = await _page(request)
    except _Refusal as exc:
        context["error"] = exc.detail
        return render(request, "keys/list.html", context, status=exc.status)
    context["keys"] = keys
    context["docs"] = [key_doc(k, now) for k in keys]
    if cursor is not None:
        pairs = ([("provider", provider)] if provider else []) + [("cursor", cursor)]
        context["next_href"] = "/console/keys?" + urlencode(pairs)
    return render(request, "keys/list.html", context, status=status)


async def _release(
    request: Request, principal: Principal, provider: str, key: str, note: str
) -> Release:
    """Release the key and audit it in one transaction; `_Refusal` when it cannot be.
    A refused release is audited too (in its own transaction: nothing changed)."""
    target = f"key:{provider}/{key}"
    try:
        if not provider or not key or max(len(provider), len(key)) > _NAME_MAX_CHARS:
            raise OrderingUsageError("give the key's provider and the key, as the list shows them")
        text = check_note(note)
    except OrderingUsageError as exc:
        # The shared check speaks of the CLI's flag; the form's field is the note.
        raise _Refusal(400, str(exc).replace("--note", "the note")) from None
    try:
        async with transaction(deps(request).pool) as conn:
            # release_key's own transaction is a savepoint inside this one: the audit row
            # below commits with the release or neither does.
            release = await release_key(conn, provider, key, text, principal.actor)
            done = release_doc(release)
            await audit(request, principal, "key.release", target, detail=done, conn=conn)
        return release
    except OrderKeyNotFound as exc:
        refusal = _Refusal(404, str(exc))
    except OrderingUsageError as exc:  # the key is not held (any more)
        refusal = _Refusal(409, str(exc))
    await audit(request, principal, "key.release", target, "refused", {"why": refusal.detail})
    raise refusal


@needs(Capability.OPERATE)
async def release_from_form(request: Request, principal: Principal) -> Response:
    form = await read_form(request)
    provider, key = form_value(form, "provider").strip(), form_value(form, "key").strip()
    note = form_value(form, "note")
    try:
        release = await _release(request, principal, provider, key, note)
    except _Refusal as exc:
        filled = {"provider": provider, "key": key, "note": note}
        return await _keys_response(request, principal, exc.status, error=exc.detail, form=filled)
    return RedirectResponse(
        "/console/keys?" + urlencode({"released": release_line(release)}), status_code=303
    )


@needs(Capability.VIEW)
async def api_keys(request: Request, principal: Principal) -> Response:
    try:
        keys, cursor, _ = await _page(request)
    except _Refusal as exc:
        return problem(exc.status, "Bad Request", exc.detail)
    now = deps(request).now()
    return JSONResponse({"items": [key_doc(k, now) for k in keys], "next_cursor": cursor})


@needs(Capability.OPERATE)
async def api_release(request: Request, principal: Principal) -> Response:
    try:
        body = json.loads(await read_body(request) or b"null")
    except ValueError:
        return problem(400, "Bad Request", "the body is not JSON")
    if not isinstance(body, dict) or not all(
        isinstance(body.get(k), str) for k in ("provider", "order_key", "note")
    ):
        return problem(400, "Bad Request", "provider, order_key and note are required strings")
    try:
        release = await _release(
            request, principal, body["provider"].strip(), body["order_key"].strip(), body["note"]
        )
    except _Refusal as exc:
        titles = {404: "Not Found", 409: "Conflict"}
        return problem(exc.status, titles.get(exc.status, "Bad Request"), exc.detail)
    return JSONResponse(release_doc(release))


ROUTES: list[BaseRoute] = [
    Route("/console/keys", keys_page, methods=["GET"]),
    Route("/console/keys/release", release_from_form, methods=["POST"]),
    Route("/console/api/v1/keys", api_keys, methods=["GET"]),
    Route("/console/api/v1/keys/release", api_release, methods=["POST"]),
]
