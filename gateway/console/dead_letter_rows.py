"""The dead-letter list's rows as one role may see them (the page's and the API's): the
brief of each, its severity, and, for roles that read payloads, its message and the
amount its event would move, read from its body as the settlement worker reads it.

Both are payload-derived (`core.payload_text`): a viewer's rows carry neither, and no
body is read for them. An API answer that carries such text to an investigator or
above writes one `payload.view` audit row (target `dlq:list`, the ids) before it
leaves, as the API's detail does for a stack.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from starlette.requests import Request

from gateway.adapters.postgres import connection
from gateway.adapters.postgres.dead_letters.bodies import bodies_of
from gateway.console.web import Principal, audit, deps
from gateway.core.console.roles import Capability, can
from gateway.core.dlq.columns import AMOUNT_BODY_MAX_BYTES, Amount, amount_of
from gateway.core.dlq.filters import DlqFilter
from gateway.core.dlq.model import RowBrief
from gateway.core.dlq.public import brief_doc
from gateway.core.payload_text import message_quotes_payload


def for_role(f: DlqFilter, principal: Principal) -> DlqFilter:
    """`f` as `principal` may search: a role that may not read a message searches the
    event ids and the messages it may read only, so a search cannot tell it what a
    withheld message says."""
    if can(principal.role, Capability.READ_PAYLOADS):
        return f
    return replace(f, search_messages=False)


async def _amounts(request: Request, rows: Sequence[RowBrief]) -> dict[int, Amount | None]:
    settings = deps(request).settings
    async with connection(deps(request).pool) as conn:
        bodies = await bodies_of(conn, [r.id for r in rows], AMOUNT_BODY_MAX_BYTES)
    schemes = {name: p.scheme for name, p in settings.providers.items()}
    merchants = {n: p.merchant for n, p in settings.providers.items() if p.merchant is not None}
    return {
        row_id: amount_of(b.provider, b.event_type, b.body, schemes, merchants)
        for row_id, b in bodies.items()
    }


async def list_docs(
    request: Request, principal: Principal, rows: Sequence[RowBrief], now: datetime, *, api: bool
) -> list[dict[str, Any]]:
    """The rows' documents for `principal` (`api`: the JSON list, audited when it
    carries payload-derived text)."""
    reads = can(principal.role, Capability.READ_PAYLOADS)
    amounts = await _amounts(request, rows) if reads and rows else {}
    docs = [brief_doc(r, now, reads_payloads=reads, amount=amounts.get(r.id)) for r in rows]
    quoted = [
        r.id
        for r in rows
        if amounts.get(r.id) is not None or (r.error_message and message_quotes_payload(r.stage))
    ]
    if api and reads and quoted:
        detail = {"via": "api:list", "ids": quoted}
        await audit(request, principal, "payload.view", "dlq:list", detail=detail)
    return docs
