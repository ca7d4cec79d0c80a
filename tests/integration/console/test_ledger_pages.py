"""The ledger pages against a real PostgreSQL and the PostgreSQL ledger (TigerBeetle too,
where `TIGERBEETLE_ADDRESS` names a server): a statement
ends at the balance `gateway ledger balances` prints, after movements the real settler
posted and adjustments made from the console; lists page by keyset; a merchant below
zero is marked in words; an adjustment is an operator's, refused with a reason when it
cannot be posted, and audited either way. The API answers as its OpenAPI fragment says.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema_rs
import pytest

from gateway import settings as settings_mod
from gateway.console.web import ConsoleDeps
from gateway.core.console.roles import Role
from gateway.settlement.batch import settle_batch
from gateway.settlement.parts import SettlementParts
from gateway.settlement.settler import SettleOutcome
from gateway.wiring.settlement import settlement_parts
from tests.integration.console.test_roles_ledger import balance, open_merchant
from tests.integration.settlement.test_money_movements import Payment
from tests.support.cli import invoke
from tests.support.config_file import write_toml
from tests.support.console import ConsoleFactory, ConsoleHarness
from tests.support.gateway import config
from tests.support.settlement import ledger_section, settlement_sections
from tests.support.stub import Stub

API = "/console/api/v1/ledger"


@pytest.fixture
def doc(database_url: str, nats_url: str, stub: Stub, redis_url: str) -> dict[str, Any]:
    """The settler's configuration on the console's database (the PostgreSQL ledger)."""
    return config(database_url, nats_url, **settlement_sections(stub.url, redis_url))


@pytest.fixture
async def parts(doc: dict[str, Any]) -> AsyncIterator[SettlementParts]:
    async with settlement_parts(settings_mod.parse(doc, env={})) as p:
        await p.settler.open_clearing_accounts()
        yield p


def cli_balance(tmp_path: Path, doc: dict[str, Any], merchant_id: str) -> int:
    """`gateway ledger balances --merchant M --json`: the merchant's balance, as printed."""
    cfg = write_toml(tmp_path / "gateway.toml", doc)
    out = invoke("ledger", "balances", "--merchant", merchant_id, "--json", "--config", str(cfg))
    out.check_returncode()
    [account] = json.loads(out.stdout)
    return int(account["balance"])


def text_of(page: str, element_id: str) -> str:
    """The text of the element with `element_id` (tags dropped, entities read)."""
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</(?:dd|strong|span|p|section)>', page, re.S)
    assert found, f"no #{element_id} on the page"
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).strip()


def row_of(page: str, merchant_id: str) -> str:
    """The balances table's row of `merchant_id`."""
    found = re.search(rf'<tr[^>]*data-merchant="{re.escape(merchant_id)}".*?</tr>', page, re.S)
    assert found, f"no row for {merchant_id}"
    return found.group(0)


async def adjust(
    client: httpx.AsyncClient, merchant_id: str, amount: str, adj_id: str, **more: str
) -> httpx.Response:
    """The form, as a browser posts it."""
    form = {"merchant": merchant_id, "amount": amount, "currency": "USD", "reason": "why",
            "id": adj_id} | more  # fmt: skip
    return await client.post("/console/ledger/adjust", data=form)


async def test_a_statement_ends_at_the_balance_ledger_balances_prints(
    console: ConsoleHarness, parts: SettlementParts, doc: dict[str, Any], tmp_path: Path
) -> None:
    """Captured 50.00, refunded 10.00 then 30.00 in all, charged back 5.00 (the settler's
    own postings), then -12.50 and +3.00 adjusted from the console: 5.50 USD."""
    p = Payment()
    await open_merchant(console, p.merchant)
    events = [p.capture(5000), p.charge_refunded(1000), p.charge_refunded(3000),
              p.dispute("funds_withdrawn", 500)]  # fmt: skip
    for event in events:
        assert await settle_batch(parts.settler, [(event, 1)]) == [SettleOutcome.SETTLED]
    operator = await console.session_client(Role.OPERATOR)
    assert (await adjust(operator, p.merchant, "-12.50", "adj-1")).status_code == 200
    r = await console.client(Role.OPERATOR).post(f"{API}/adjustments", json={
        "merchant_id": p.merchant, "amount_minor": 300, "currency": "USD",
        "reason": "goodwill", "adjustment_id": "adj-2"})  # fmt: skip
    assert r.status_code == 200, r.text

    viewer = await console.session_client(Role.VIEWER)
    page = await viewer.get("/console/ledger/statement", params={"merchant": p.merchant})
    assert page.status_code == 200, page.text
    assert text_of(page.text, "opening") == "0.00 USD"
    assert text_of(page.text, "closing").startswith("5.50 USD")
    assert text_of(page.text, "ledger-balance").startswith("5.50 USD, as the closing balance")
    assert cli_balance(tmp_path, doc, p.merchant) == 550 == await balance(console, p.merchant)

    api = (await viewer.get(f"{API}/statement", params={"merchant": p.merchant})).json()
    assert (api["closing_minor"], api["ledger_balance_minor"], api["movements"]) == (550, 550, 6)
    assert [(i["kind"], i["posted"], i["balance"]) for i in api["items"]] == [
        ("capture", "50.00 USD", "50.00 USD"),
        ("refund", "-10.00 USD", "40.00 USD"),
        ("refund", "-20.00 USD", "20.00 USD"),
        ("chargeback", "-5.00 USD", "15.00 USD"),
        ("debit_adjustment", "-12.50 USD", "2.50 USD"),
        ("credit_adjustment", "3.00 USD", "5.50 USD"),
    ]
    capture = api["items"][0]
    assert (capture["provider"], capture["amount"], capture["rate_text"]) == (
        "stripe",
        "50.00 USD",
        "1",
    )
    assert capture["event_id"].startswith(f"evt_{p.tag}") and capture["event_id"] in page.text

    # A window that starts after the movements: their sum is the opening balance.
    later = await viewer.get(
        f"{API}/statement", params={"merchant": p.merchant, "since": "2099-01-01"}
    )
    assert (later.json()["opening_minor"], later.json()["items"]) == (550, [])


async def test_statement_and_transfers_page_by_keyset(console: ConsoleHarness) -> None:
    """Five entries, two a page: every line once, in order, each page's balances the
    window's own (worked out again, not carried in the link)."""
    await open_merchant(console, "m_pages")
    client = console.client(Role.OPERATOR)
    for n in range(1, 6):
        r = await client.post(f"{API}/adjustments", json={
            "merchant_id": "m_pages", "amount_minor": 100 * n, "currency": "USD",
            "reason": "paging", "adjustment_id": f"page-{n}"})  # fmt: skip
        assert r.status_code == 200, r.text

    seen, cursor, befores = [], None, []
    while True:
        params = {"merchant": "m_pages", "limit": "2"} | ({"cursor": cursor} if cursor else {})
        page = (await client.get(f"{API}/statement", params=params)).json()
        befores.append(page["before_minor"])
        seen += [(i["movement_id"], i["balance_minor"]) for i in page["items"]]
        assert page["closing_minor"] == 1500
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [("page-1", 100), ("page-2", 300), ("page-3", 600), ("page-4", 1000),
                    ("page-5", 1500)]  # fmt: skip
    assert befores == [0, 300, 1000]

    listed, cursor = [], None
    while True:
        params = {"merchant": "m_pages", "kind": "credit_adjustment", "limit": "2"}
        params |= {"cursor": cursor} if cursor else {}
        page = (await client.get(f"{API}/transfers", params=params)).json()
        listed += [i["posted_minor"] for i in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert listed == [100, 200, 300, 400, 500]

    # The HTML list: its "next page" link carries the filters and the cursor.
    html_page = await client.get(
        "/console/ledger/transfers", params={"merchant": "m_pages", "limit": "3"}
    )
    found = re.search(r'<a href="([^"]+)" rel="next">', html_page.text)
    assert found, "no next page link"
    second = await client.get(html.unescape(found.group(1)))
    assert second.status_code == 200
    assert "page-4" in second.text and "page-5" in second.text and "page-1" not in second.text
    assert (await client.get(f"{API}/transfers", params={"limit": "1001"})).status_code == 400
    bad = await client.get(f"{API}/transfers", params={"cursor": "not-ours"})
    assert bad.status_code == 400 and bad.headers["content-type"] == "application/problem+json"


async def test_a_merchant_below_zero_is_marked_negative_in_words(console: ConsoleHarness) -> None:
    for merchant in ("m_minus", "m_plus"):
        await open_merchant(console, merchant)
    operator = console.client(Role.OPERATOR)
    for merchant, amount in (("m_minus", "-25.00"), ("m_plus", "7.00")):
        assert (await adjust(operator, merchant, amount, f"adj-{merchant}")).status_code == 200

    viewer = await console.session_client(Role.VIEWER)
    page = (await viewer.get("/console/ledger")).text
    minus, plus = row_of(page, "m_minus"), row_of(page, "m_plus")
    assert ">negative<" in minus and "-25.00 USD" in minus
    assert ">negative<" not in plus and "7.00 USD" in plus
    assert page.index('data-merchant="m_minus"') < page.index('data-merchant="m_plus"')
    assert text_of(page, "negative-counts") == "1 USD"

    only = (await viewer.get("/console/ledger", params={"negative": "1"})).text
    assert 'data-merchant="m_minus"' in only and 'data-merchant="m_plus"' not in only
    api = (await viewer.get(f"{API}/balances")).json()
    assert api["negative"] == {"USD": 1}
    assert {i["merchant_id"]: i["negative"] for i in api["items"]} == {
        "m_minus": True,
        "m_plus": False,
    }

    overview = (await viewer.get("/console/")).text
    assert text_of(overview, "negative-total") == "1"
    assert "negative: finance settles it" in overview
    figures = (await viewer.get("/console/api/v1/stats/overview")).json()
    assert figures["ledger"] == {
        "negative_merchants": {"USD": 1},
        "negative_total": 1,
        "note": None,
    }


async def test_an_adjustment_is_an_operators_and_is_audited(console: ConsoleHarness) -> None:
    await open_merchant(console, "m_1")
    viewer = await console.session_client(Role.VIEWER)
    refused = await adjust(viewer, "m_1", "-12.50", "adj-v")
    assert refused.status_code == 403
    assert "operator" in refused.text
    api = await console.client(Role.INVESTIGATOR).post(f"{API}/adjustments", json={})
    assert api.status_code == 403
    assert await balance(console, "m_1") == 0
    assert await console.fetchval("SELECT count(*) FROM ledger_adjustments") == 0
    assert len(await console.audit("forbidden")) == 2

    operator = await console.session_client(Role.OPERATOR)
    why = {"reason": "duplicate capture, ticket 812", "note": "see the ticket"}
    done = await adjust(operator, "m_1", "-12.50", "adj-812", **why)
    assert done.status_code == 200
    assert text_of(done.text, "adjusted").startswith("Adjustment posted")
    assert "adjustment adj-812: -12.50 USD to m_1, posted" in done.text
    assert text_of(done.text, "adjusted-balance").startswith("-12.50 USD")
    assert "debit_adjustment of -12.50 USD" in text_of(done.text, "adjusted-transfer")
    assert await balance(console, "m_1") == -1250
    [entry] = await console.fetch("SELECT * FROM ledger_adjustments")
    assert (entry["actor"], entry["reason"], entry["note"]) == (
        "console:operator", "duplicate capture, ticket 812", "see the ticket")  # fmt: skip

    [row] = await console.audit("ledger.adjust")
    assert (row["actor"], row["role"], row["target"], row["outcome"]) == (
        "console:operator", "operator", "adjustment:adj-812", "ok")  # fmt: skip
    detail = json.loads(row["detail"])
    assert detail["reason"] == "duplicate capture, ticket 812"
    assert (detail["merchant_id"], detail["amount_minor"], detail["moved"]) == ("m_1", -1250, True)

    # The same entry again: nothing moves, and that is said (and audited).
    again = await adjust(operator, "m_1", "-12.50", "adj-812", **why)
    assert again.status_code == 200 and "nothing moved again" in again.text
    assert await balance(console, "m_1") == -1250
    assert [json.loads(r["detail"])["moved"] for r in await console.audit("ledger.adjust")] == [
        True, False]  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "status", "says"),
    [
        ({"reason": ""}, 400, "reason: required"),
        ({"reason": "   "}, 400, "reason: required"),
        ({"amount": "0.00"}, 400, "amount: must not be zero"),
        ({"amount": "0"}, 400, "amount: must not be zero"),
        ({"amount": "12.505"}, 400, "is not a whole number of minor units (USD has 2 decimals)"),
        ({"amount": "1,250"}, 400, "is not an amount like -12.50"),
        ({"amount": "1e3"}, 400, "is not an amount like -12.50"),
        ({"id": ""}, 400, "id: required"),
        ({"currency": "dollars"}, 400, "is not a currency code"),
        ({"merchant": "m_nobody"}, 404, "merchant 'm_nobody' has no USD account"),
        ({"amount": "-13.00"}, 409, "id 'adj-first' was used for -12.50 USD to 'm_1'"),
        ({"reason": "another reason"}, 409, "was used for"),
    ],
)
async def test_an_adjustment_that_cannot_be_posted_is_refused_on_the_page(
    console: ConsoleHarness, fields: dict[str, str], status: int, says: str
) -> None:
    await open_merchant(console, "m_1")
    operator = await console.session_client(Role.OPERATOR)
    assert (await adjust(operator, "m_1", "-12.50", "adj-first")).status_code == 200
    audited = len(await console.audit("ledger.adjust"))

    form = {"merchant": "m_1", "amount": "-12.50", "currency": "USD", "reason": "why",
            "id": "adj-first"} | fields  # fmt: skip
    r = await operator.post("/console/ledger/adjust", data=form)
    assert r.status_code == status
    assert says in html.unescape(r.text)
    assert re.search(r'<p class="error" role="alert">', r.text)
    assert await balance(console, "m_1") == -1250
    assert await console.fetchval("SELECT count(*) FROM ledger_adjustments") == 1
    # Refused by the ledger's side (404, 409): audited as refused, with why.
    rows = (await console.audit("ledger.adjust"))[audited:]
    if status == 400:
        assert rows == []
    else:
        [row] = rows
        assert row["outcome"] == "refused" and says in json.loads(row["detail"])["why"]
    # What was typed is kept in the form, to correct it.
    assert 'value="m_1"' in r.text or 'value="m_nobody"' in r.text


async def test_the_api_answers_as_documented(console: ConsoleHarness) -> None:
    await open_merchant(console, "m_doc")
    operator = console.client(Role.OPERATOR)
    entry = {"merchant_id": "m_doc", "amount_minor": -500, "currency": "usd", "reason": "r",
             "adjustment_id": "doc-1", "note": None}  # fmt: skip
    checks = [
        ("LedgerAdjusted", await operator.post(f"{API}/adjustments", json=entry)),
        ("Problem", await operator.post(f"{API}/adjustments", json=entry | {"amount_minor": 1})),
        ("Problem", await operator.post(f"{API}/adjustments", json=entry | {"amount_minor": 1.5})),
        ("Problem", await operator.post(f"{API}/adjustments", json=entry | {"merchant_id": "x"})),
        ("Problem", await operator.post(f"{API}/adjustments", content=b"{")),
        ("LedgerStatement", await operator.get(f"{API}/statement?merchant=m_doc")),
        ("Problem", await operator.get(f"{API}/statement")),
        ("Problem", await operator.get(f"{API}/statement?merchant=m_doc&since=yesterday")),
        ("LedgerMovementList", await operator.get(f"{API}/transfers?payment=adjustment:doc-1")),
        ("Problem", await operator.get(f"{API}/transfers?kind=gift")),
        ("MerchantBalanceList", await operator.get(f"{API}/balances?currency=USD")),
        ("Problem", await operator.get(f"{API}/balances?currency=1")),
    ]
    spec = (await operator.get("/console/api/v1/openapi.json")).json()
    statuses = []
    for name, r in checks:
        statuses.append(r.status_code)
        root = {"$ref": f"#/components/schemas/{name}", "components": spec["components"]}
        jsonschema_rs.validator_for(root, validate_formats=True).validate(r.json())
    assert statuses == [200, 409, 400, 404, 400, 200, 400, 400, 200, 400, 200, 400]
    adjusted = checks[0][1].json()
    assert (adjusted["currency"], adjusted["amount"], adjusted["moved"]) == (
        "USD",
        "-5.00 USD",
        True,
    )
    assert adjusted["transfer"]["payment_id"] == "adjustment:doc-1"
    [listed] = checks[8][1].json()["items"]
    assert (listed["kind"], listed["posted_minor"], listed["provider"]) == (
        "debit_adjustment", -500, "operator")  # fmt: skip


async def test_without_a_ledger_the_pages_say_so(console: ConsoleHarness) -> None:
    """A console given no ledger: balances and adjustments answer 503 saying why, the
    overview says "unavailable", and the statement still reads the recorded movements."""
    console.deps.books = None
    viewer, operator = console.client(Role.VIEWER), await console.session_client(Role.OPERATOR)
    page = await viewer.get("/console/ledger")
    assert page.status_code == 503 and "started without a ledger" in page.text
    assert (await viewer.get(f"{API}/balances")).status_code == 503
    overview = (await viewer.get("/console/api/v1/stats/overview")).json()
    assert overview["ledger"]["negative_total"] is None
    assert "without a ledger" in overview["ledger"]["note"]
    r = await adjust(operator, "m_1", "1.00", "adj-x")
    assert r.status_code == 503 and "gateway ledger adjust" in r.text
    assert (await viewer.get("/console/ledger/statement?merchant=m_1")).status_code == 200


async def test_hostile_names_are_text(console: ConsoleHarness) -> None:
    hostile = '<script>alert(1)</script>"><img src=x onerror=alert(1)>'
    await open_merchant(console, hostile)
    operator = await console.session_client(Role.OPERATOR)
    r = await adjust(operator, hostile, "-1.00", "adj-h", reason=hostile, note=hostile)
    assert r.status_code == 200
    for path in ("/console/ledger", "/console/ledger/transfers"):
        text = (await operator.get(path)).text
        assert "<script>alert(1)" not in text and "<img src=x" not in text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<script>alert(1)" not in r.text


def test_a_console_built_without_books_builds() -> None:
    """`ConsoleDeps.books` is optional: the app builds for a console with no ledger."""
    deps = ConsoleDeps.__dataclass_fields__["books"]
    assert deps.default is None


async def test_on_tigerbeetle_the_pages_read_and_adjust_the_same_ledger_the_settler_posts_to(
    console_factory: ConsoleFactory, database_url: str, nats_url: str, stub: Stub,
    redis_url: str, tmp_path: Path,
) -> None:  # fmt: skip
    """With `[ledger] backend = "tigerbeetle"` (skipped without a server): the settler's
    postings and a console adjustment land in TigerBeetle, and the statement, the
    balances page and `gateway ledger balances` agree."""
    ledger = ledger_section("tigerbeetle")
    doc = config(database_url, nats_url, **settlement_sections(stub.url, redis_url, ledger=ledger))
    console = await console_factory(ledger=ledger)
    p = Payment()
    await open_merchant(console, p.merchant)
    async with settlement_parts(settings_mod.parse(doc, env={})) as parts:
        await parts.settler.open_clearing_accounts()
        for event in (p.capture(5000), p.charge_refunded(1000)):
            assert await settle_batch(parts.settler, [(event, 1)]) == [SettleOutcome.SETTLED]
    operator = await console.session_client(Role.OPERATOR)
    assert (await adjust(operator, p.merchant, "-2.50", f"adj-{p.tag}")).status_code == 200
    viewer = await console.session_client(Role.VIEWER)
    page = await viewer.get("/console/ledger/statement", params={"merchant": p.merchant})
    assert text_of(page.text, "closing").startswith("37.50 USD")
    assert text_of(page.text, "ledger-balance").startswith("37.50 USD, as the closing balance")
    # The first page, then the next one from its cursor (a long-lived cluster holds many
    # merchants): every page answers, and the merchant's row says what the ledger holds.
    first = await viewer.get("/console/ledger", params={"limit": "1"})
    assert first.status_code == 200, first.text
    following = re.search(r'<a href="([^"]+)" rel="next">', first.text)
    assert following is not None, "one merchant a page: there is a next page"
    more = await viewer.get(html.unescape(following.group(1)))
    assert more.status_code == 200, more.text
    mine = (await viewer.get("/console/ledger", params={"merchant": p.merchant})).text
    assert "37.50" in row_of(mine, p.merchant)
    assert cli_balance(tmp_path, doc, p.merchant) == 3750 == await balance(console, p.merchant)


async def test_the_balances_list_pages_on_by_its_next_link(console: ConsoleHarness) -> None:
    """A page of one merchant, then the next from its link: the cursor carries a 128-bit
    account id, which JSON numbers cannot."""
    for merchant in ("m_page_a", "m_page_b"):
        await open_merchant(console, merchant)
    viewer = console.client(Role.VIEWER)
    first = await viewer.get("/console/ledger", params={"limit": "1"})
    assert first.status_code == 200, first.text
    following = re.search(r'<a href="([^"]+)" rel="next">', first.text)
    assert following is not None
    second = await viewer.get(html.unescape(following.group(1)))
    assert second.status_code == 200, second.text
    shown = [re.findall(r'data-merchant="([^"]+)"', page.text) for page in (first, second)]
    assert sorted(m for page in shown for m in page) == ["m_page_a", "m_page_b"]
