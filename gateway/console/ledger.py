"""The ledger, as finance and on-call read it (VIEW): merchants' balances with the ones
below zero marked "negative", a merchant's statement (opening balance, each movement
with the balance after it, closing balance), and the transfer list with `gateway ledger
transfers`'s filters, each a page at a time by keyset. Money is always shown with its
currency and decimals. HTML under /console/ledger, JSON under /console/api/v1/ledger;
adjustments are `console.adjustments`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.console.guard import needs
from gateway.console.ledger_reads import (
    LedgerUnreadable,
    balances_view,
    cursor_of,
    ledger_balance,
    statement_page,
    transfers_page,
)
from gateway.console.web import Principal, deps, problem, render
from gateway.core.console.roles import Capability, can
from gateway.core.finance.input import (
    FinanceUsageError,
    StatementAsk,
    parse_balances_query,
    parse_statement_query,
    parse_transfers_query,
)
from gateway.core.finance.statements import Line, Movement
from gateway.core.finance.view import (
    MerchantBalance,
    StatementPage,
    counts_text,
    encode_balance_cursor,
    line_doc,
    money,
)
from gateway.core.settlement.instructions import SettlementKind

_STATEMENT_FIELDS = ("merchant", "currency", "since", "until", "limit")
_TRANSFER_FIELDS = ("merchant", "payment", "kind", "currency", "since", "until", "limit")


def balance_doc(b: MerchantBalance) -> dict[str, Any]:
    """A merchant account as the list and the API show it."""
    amounts = {"balance": b.balance_minor, "debits": b.debits_posted,
               "credits": b.credits_posted, "reserved": b.reserved_minor}  # fmt: skip
    return b.as_dict() | {name: money(value, b.currency) for name, value in amounts.items()}


def statement_doc(ask: StatementAsk, page: StatementPage, ledger_now: int | None) -> dict[str, Any]:
    """A statement page as the API answers it and the page shows it. `ledger_now`: the
    merchant's balance in the ledger, asked only for a statement that runs to now."""
    c = ask.currency
    return {
        "merchant_id": ask.merchant_id,
        "currency": c,
        "since": None if ask.since is None else ask.since.isoformat(),
        "until": None if ask.until is None else ask.until.isoformat(),
        "opening_minor": page.opening_minor,
        "opening": money(page.opening_minor, c),
        "before_minor": page.before_minor,
        "before": money(page.before_minor, c),
        "closing_minor": page.closing_minor,
        "closing": money(page.closing_minor, c),
        "movements": page.movements,
        "ledger_balance_minor": ledger_now,
        "ledger_balance": None if ledger_now is None else money(ledger_now, c),
        "items": [line_doc(line) for line in page.lines],
        "next_cursor": None if page.last_id is None else cursor_of(page.lines[-1].movement),
    }


def _form(request: Request, names: tuple[str, ...], **defaults: str) -> dict[str, str]:
    q = request.query_params
    return {n: (q.get(n) or defaults.get(n, "")).strip() for n in names}


def _next(path: str, form: dict[str, str], cursor: str | None) -> str | None:
    """The next page's link: the filters as given, and the cursor."""
    if cursor is None:
        return None
    return f"{path}?{urlencode([*((k, v) for k, v in form.items() if v), ('cursor', cursor)])}"


def _base(principal: Principal, tab: str) -> dict[str, Any]:
    """What every ledger page shows: its tabs (Adjust for operators), its error."""
    can_adjust = can(principal.role, Capability.OPERATE)
    return {"tab": tab, "can_adjust": can_adjust, "error": None, "unavailable": None}


@needs(Capability.VIEW)
async def balances_html(request: Request, principal: Principal) -> Response:
    context = _base(principal, "balances") | {
        "form": _form(request, ("merchant", "currency", "negative")),
        "rows": [],
        "negative": {},
        "negative_text": "",
        "next_href": None,
    }
    try:
        ask = parse_balances_query(request.query_params)
        view = await balances_view(deps(request).books, ask)
    except FinanceUsageError as exc:
        context["error"] = str(exc)
        return render(request, "ledger/balances.html", context, status=400)
    except LedgerUnreadable as exc:
        context["unavailable"] = exc.detail
        return render(request, "ledger/balances.html", context, status=503)
    cursor = None if view.next_key is None else encode_balance_cursor(view.next_key)
    context.update(
        rows=[balance_doc(b) for b in view.rows],
        negative=view.negative,
        negative_text=counts_text(view.negative),
        next_href=_next("/console/ledger", context["form"], cursor),
    )
    return render(request, "ledger/balances.html", context)


async def _statement(request: Request) -> tuple[StatementAsk | None, dict[str, Any] | None]:
    """Raises `FinanceUsageError`."""
    console = deps(request)
    ask = parse_statement_query(
        request.query_params, console.now(), console.settings.settlement.currency
    )
    if ask is None:
        return None, None
    page = await statement_page(console.pool, ask)
    ledger_now = None
    if ask.until is None:  # a statement to now ends where the ledger's balance stands
        ledger_now = await ledger_balance(console.books, ask.merchant_id, ask.currency)
    return ask, statement_doc(ask, page, ledger_now)


@needs(Capability.VIEW)
async def statement_html(request: Request, principal: Principal) -> Response:
    currency = deps(request).settings.settlement.currency
    form = _form(request, _STATEMENT_FIELDS, currency=currency)
    context = _base(principal, "statement") | {
        "form": form,
        "statement": None,
        "continued": bool(request.query_params.get("cursor")),
        "next_href": None,
        "adjust_href": None,
    }
    try:
        ask, doc = await _statement(request)
    except FinanceUsageError as exc:
        context["error"] = str(exc)
        return render(request, "ledger/statement.html", context, status=400)
    if ask is not None and doc is not None:
        context["statement"] = doc
        context["next_href"] = _next("/console/ledger/statement", form, doc["next_cursor"])
        pairs = {"merchant": ask.merchant_id, "currency": ask.currency}
        context["adjust_href"] = "/console/ledger/adjust?" + urlencode(pairs)
    return render(request, "ledger/statement.html", context)


@needs(Capability.VIEW)
async def transfers_html(request: Request, principal: Principal) -> Response:
    form = _form(request, _TRANSFER_FIELDS)
    context = _base(principal, "transfers") | {
        "form": form,
        "kinds": [k.value for k in SettlementKind],
        "rows": [],
        "next_href": None,
    }
    try:
        ask = parse_transfers_query(request.query_params, deps(request).now())
    except FinanceUsageError as exc:
        context["error"] = str(exc)
        return render(request, "ledger/transfers.html", context, status=400)
    found, cursor = await transfers_page(deps(request).pool, ask)
    rows = [line_doc(_alone(m), balance=False) for m in found]
    context.update(rows=rows, next_href=_next("/console/ledger/transfers", form, cursor))
    return render(request, "ledger/transfers.html", context)


def _alone(m: Movement) -> Line:
    """A listed movement as a line of its own (a list carries no running balance)."""
    return Line(m, m.signed_minor)


@needs(Capability.VIEW)
async def api_balances(request: Request, principal: Principal) -> Response:
    try:
        view = await balances_view(deps(request).books, parse_balances_query(request.query_params))
    except FinanceUsageError as exc:
        return problem(400, "Bad Request", str(exc))
    except LedgerUnreadable as exc:
        return problem(503, "Service Unavailable", exc.detail)
    cursor = None if view.next_key is None else encode_balance_cursor(view.next_key)
    return JSONResponse(
        {
            "items": [balance_doc(b) for b in view.rows],
            "next_cursor": cursor,
            "negative": view.negative,
        }
    )


@needs(Capability.VIEW)
async def api_statement(request: Request, principal: Principal) -> Response:
    try:
        _, doc = await _statement(request)
    except FinanceUsageError as exc:
        return problem(400, "Bad Request", str(exc))
    if doc is None:
        return problem(400, "Bad Request", "merchant: required")
    return JSONResponse(doc)


@needs(Capability.VIEW)
async def api_transfers(request: Request, principal: Principal) -> Response:
    try:
        ask = parse_transfers_query(request.query_params, deps(request).now())
    except FinanceUsageError as exc:
        return problem(400, "Bad Request", str(exc))
    found, cursor = await transfers_page(deps(request).pool, ask)
    items = [line_doc(_alone(m), balance=False) for m in found]
    return JSONResponse({"items": items, "next_cursor": cursor})


ROUTES: list[BaseRoute] = [
    Route("/console/ledger", balances_html, methods=["GET"]),
    Route("/console/ledger/statement", statement_html, methods=["GET"]),
    Route("/console/ledger/transfers", transfers_html, methods=["GET"]),
    Route("/console/api/v1/ledger/balances", api_balances, methods=["GET"]),
    Route("/console/api/v1/ledger/statement", api_statement, methods=["GET"]),
    Route("/console/api/v1/ledger/transfers", api_transfers, methods=["GET"]),
]
