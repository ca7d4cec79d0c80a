"""Correcting entries from the console (operator): what `gateway ledger adjust` does,
through the same function (`ConsoleDeps.books.adjust`, which is
`gateway.settlement.finance.adjust`), idempotent by the operator's id, and written to
the audit trail as `ledger.adjust` (who, why, what moved), refusals included. HTML at
/console/ledger/adjust, JSON at POST /console/api/v1/ledger/adjustments.

The audit row follows the entry instead of sharing its transaction: the service posts
the entry in transactions of its own around the ledger's call (TigerBeetle is no
PostgreSQL transaction), and records who asked and why with the entry itself, in
`ledger_adjustments`. An entry whose audit row could not be written is still posted and
named there; submitting it again moves nothing and writes the row.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.adapters.postgres import Pool, connection
from gateway.adapters.postgres import statements as statements_store
from gateway.console.guard import by_method, needs
from gateway.console.ledger_reads import ledger_balance
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
from gateway.core.console.roles import Capability
from gateway.core.finance.adjustment_form import (
    adjustment_line,
    adjustment_payment_id,
    read_adjustment_form,
    read_adjustment_json,
)
from gateway.core.finance.input import FinanceUsageError
from gateway.core.finance.statements import Adjustment, Filters, Line, Movement
from gateway.core.finance.view import line_doc, money
from gateway.errors import PermanentError, TransientError, UnknownMerchant, UsageError

log = logging.getLogger(__name__)

_FIELDS = ("merchant", "amount", "currency", "reason", "id", "note")
_TITLES = {400: "Bad Request", 404: "Not Found", 409: "Conflict", 503: "Service Unavailable"}


class _Refusal(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class Adjusted:
    """An entry as stored under its id, whether this request moved money, its recorded
    movement (the transfer) and the merchant's balance in the ledger after it."""

    entry: Adjustment
    moved: bool
    transfer: Movement | None
    balance_minor: int | None

    def as_dict(self) -> dict[str, Any]:
        e, t, b = self.entry, self.transfer, self.balance_minor
        return {
            "adjustment_id": e.adjustment_id,
            "merchant_id": e.merchant_id,
            "amount_minor": e.amount_minor,
            "currency": e.currency,
            "amount": money(e.amount_minor, e.currency),
            "reason": e.reason,
            "note": e.note,
            "actor": e.actor,
            "moved": self.moved,
            "line": adjustment_line(e, self.moved),
            "transfer": None if t is None else line_doc(Line(t, t.signed_minor), balance=False),
            "balance_minor": b,
            "balance": None if b is None else money(b, e.currency),
        }


async def _transfer(pool: Pool, adjustment_id: str) -> Movement | None:
    """The entry's recorded movement (pending, settled or failed)."""
    wanted = Filters(payment_id=adjustment_payment_id(adjustment_id), settled_only=False)
    async with connection(pool) as conn:
        found = await statements_store.page(conn, wanted, 0, 1)
    return found[0] if found else None


def _entry_doc(wanted: Adjustment) -> dict[str, Any]:
    return {"merchant_id": wanted.merchant_id, "amount_minor": wanted.amount_minor,
            "currency": wanted.currency, "reason": wanted.reason, "note": wanted.note}  # fmt: skip


async def _adjust(request: Request, principal: Principal, wanted: Adjustment) -> Adjusted:
    """Post `wanted` and audit it; `_Refusal` (audited too) when it cannot be posted."""
    console = deps(request)
    target = f"adjustment:{wanted.adjustment_id}"
    outcome = "refused"
    try:
        if console.books is None:
            raise _Refusal(503, "this console runs without a ledger: use gateway ledger adjust")
        stored, moved = await console.books.adjust(wanted)
    except _Refusal as exc:
        refusal = exc
    except UnknownMerchant as exc:
        refusal = _Refusal(404, str(exc))
    except UsageError as exc:
        # Every field was checked before (`core.finance.adjustment_form`), so what the service
        # still refuses is its id taken by another entry; its message names the CLI's flag.
        refusal = _Refusal(409, str(exc).replace("choose another --id", "choose another id"))
    except PermanentError as exc:
        refusal = _Refusal(409, f"the ledger refused the entry: {exc}")
    except TransientError as exc:
        outcome = "failed"
        refusal = _Refusal(
            503,
            f"the ledger did not answer ({exc.error_class}): submit it again with the same "
            "id, and it is posted once",
        )
    else:
        done = Adjusted(
            stored,
            moved,
            await _transfer(console.pool, stored.adjustment_id),
            await ledger_balance(console.books, stored.merchant_id, stored.currency),
        )
        detail = _entry_doc(stored) | {
            "moved": moved,
            "settlement_row": None if done.transfer is None else done.transfer.id,
        }
        await audit(request, principal, "ledger.adjust", target, detail=detail)
        log.info(
            "ledger adjusted from the console",
            extra={"adjustment_id": stored.adjustment_id, "merchant_id": stored.merchant_id,
                   "amount_minor": stored.amount_minor, "currency": stored.currency,
                   "moved": moved, "actor": principal.actor},
        )  # fmt: skip
        return done
    detail = _entry_doc(wanted) | {"why": refusal.detail}
    await audit(request, principal, "ledger.adjust", target, outcome, detail)
    raise refusal


def _page(form: dict[str, str], **extra: Any) -> dict[str, Any]:
    return {"tab": "adjust", "can_adjust": True, "form": form, "error": None,
            "unavailable": None, "done": None} | extra  # fmt: skip


@needs(Capability.OPERATE)
async def adjust_page(request: Request, principal: Principal) -> Response:
    q = request.query_params
    form = {name: (q.get(name) or "").strip() for name in _FIELDS}
    form["currency"] = form["currency"] or deps(request).settings.settlement.currency
    return render(request, "ledger/adjust.html", _page(form))


@needs(Capability.OPERATE)
async def adjust_from_form(request: Request, principal: Principal) -> Response:
    posted = await read_form(request)
    form = {name: form_value(posted, name) for name in _FIELDS}
    try:
        wanted = read_adjustment_form(form, principal.actor)
        done = await _adjust(request, principal, wanted)
    except (FinanceUsageError, _Refusal) as exc:
        status = exc.status if isinstance(exc, _Refusal) else 400
        return render(request, "ledger/adjust.html", _page(form, error=str(exc)), status=status)
    # The form again, empty but for the merchant and currency: the next entry needs an id
    # of its own, and the one just posted is shown above it.
    fresh = {n: form[n] if n in ("merchant", "currency") else "" for n in _FIELDS}
    return render(request, "ledger/adjust.html", _page(fresh, done=done.as_dict()))


@needs(Capability.OPERATE)
async def api_adjust(request: Request, principal: Principal) -> Response:
    try:
        body = json.loads(await read_body(request) or b"null")
    except ValueError:
        return problem(400, "Bad Request", "the body is not JSON")
    try:
        done = await _adjust(request, principal, read_adjustment_json(body, principal.actor))
    except FinanceUsageError as exc:
        return problem(400, "Bad Request", str(exc))
    except _Refusal as exc:
        return problem(exc.status, _TITLES.get(exc.status, "Bad Request"), exc.detail)
    return JSONResponse(done.as_dict())


ROUTES: list[BaseRoute] = [
    # One route for both methods, so a 405 names both in `Allow`.
    Route(
        "/console/ledger/adjust",
        by_method(get=adjust_page, post=adjust_from_form),
        methods=["GET", "POST"],
    ),
    Route("/console/api/v1/ledger/adjustments", api_adjust, methods=["POST"]),
]
