"""Route x role for the ledger pages: every role may read the balances, a statement and
the transfer list; only an operator (or admin) may open the adjustment form or post an
entry. A refused post answers 403 and moves nothing; an allowed one moves the money."""

from __future__ import annotations

import pytest

from gateway.adapters.postgres.account_names import PostgresAccountNames
from gateway.core.console.roles import CAPABILITIES, Role
from gateway.settlement import ledger_ops
from tests.support.console import Case, ConsoleHarness, check_case

API = "/console/api/v1/ledger"
_FORM = {"merchant": "m_1", "amount": "-12.50", "currency": "USD", "reason": "roles", "id": "r-1"}
_JSON = {"merchant_id": "m_1", "amount_minor": -1250, "currency": "USD", "reason": "roles",
         "adjustment_id": "r-1"}  # fmt: skip

CASES: list[Case] = [
    ("GET", "/console/ledger", Role.VIEWER, None),
    ("GET", "/console/ledger?negative=1&currency=USD", Role.VIEWER, None),
    ("GET", "/console/ledger/statement", Role.VIEWER, None),
    ("GET", "/console/ledger/statement?merchant=m_1&since=30d", Role.VIEWER, None),
    ("GET", "/console/ledger/transfers?merchant=m_1&kind=capture", Role.VIEWER, None),
    ("GET", "/console/ledger/adjust?merchant=m_1", Role.OPERATOR, None),
    ("POST", "/console/ledger/adjust", Role.OPERATOR, _FORM),
    ("GET", f"{API}/balances", Role.VIEWER, None),
    ("GET", f"{API}/statement?merchant=m_1", Role.VIEWER, None),
    ("GET", f"{API}/transfers?payment=pi_1", Role.VIEWER, None),
    ("POST", f"{API}/adjustments", Role.OPERATOR, _JSON),
]


async def open_merchant(console: ConsoleHarness, merchant_id: str, currency: str = "USD") -> None:
    """The merchant's account, opened as `gateway ledger open-account` opens it."""
    assert console.books is not None
    names = PostgresAccountNames(console.pool)
    await ledger_ops.open_account(await console.books.ledger(), names, merchant_id, currency)


async def balance(console: ConsoleHarness, merchant_id: str) -> int | None:
    assert console.books is not None
    return await console.books.merchant_balance(merchant_id, "USD")


@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize("case", CASES, ids=[f"{m} {p}" for m, p, _, _ in CASES])
async def test_route_role(console: ConsoleHarness, case: Case, role: Role) -> None:
    await open_merchant(console, "m_1")
    r = await check_case(console, case, role)
    method, _, least, _ = case
    allowed = CAPABILITIES[least] <= CAPABILITIES[role]
    if method == "GET":
        assert r.status_code == 200 or not allowed, r.text[:300]
        return
    entries = await console.fetchval("SELECT count(*) FROM ledger_adjustments")
    if allowed:
        assert r.status_code == 200, r.text[:300]
        assert (entries, await balance(console, "m_1")) == (1, -1250)
    else:
        assert (entries, await balance(console, "m_1")) == (0, 0)
