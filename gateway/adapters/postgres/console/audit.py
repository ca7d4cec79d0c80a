"""The console's audit trail: one insert-only row per state change, login, refusal and
payload view. Written inside the caller's transaction, so a failed audit write refuses
the change it records."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from gateway.adapters.postgres import Conn, translate_errors
from gateway.core.console.audit_values import bounded_detail, bounded_text


class Actor(Protocol):
    """Who did it (the console's `Principal`)."""

    @property
    def actor(self) -> str: ...
    @property
    def role(self) -> Any: ...
    @property
    def via(self) -> str: ...


_INSERT = """
INSERT INTO console_audit (actor, role, via, address, action, target, outcome, detail)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb)
"""


async def record(
    conn: Conn,
    *,
    actor: str,
    role: str | None,
    via: str,
    address: str | None,
    action: str,
    target: str | None = None,
    outcome: str = "ok",
    detail: Mapping[str, Any] | None = None,
) -> None:
    """Append one audit row (call it inside the change's own `transaction(pool)`). Every
    text a request could choose is bounded (`core.console.audit_values`): the row is for ever."""
    with translate_errors():
        await conn.execute(
            _INSERT,
            bounded_text(actor),
            role,
            via,
            bounded_text(address),
            action,
            bounded_text(target),
            outcome,
            json.dumps(bounded_detail(detail), default=str),
        )


async def record_for(
    conn: Conn,
    principal: Actor,
    request_address: str | None,
    action: str,
    target: str | None,
    outcome: str = "ok",
    detail: Mapping[str, Any] | None = None,
) -> None:
    """`record` for what an authenticated principal did."""
    await record(
        conn,
        actor=principal.actor,
        role=str(principal.role),
        via=principal.via,
        address=request_address,
        action=action,
        target=target,
        outcome=outcome,
        detail=detail,
    )
