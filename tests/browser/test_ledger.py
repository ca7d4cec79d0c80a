"""The ledger pages in a real browser, against the real `gateway console` on the
PostgreSQL ledger: an operator finds a merchant in the balances, posts a correcting
entry through the form, sees the transfer and the merchant now marked negative, reads
the statement that ends at that balance, and is told why a reused id is refused; a
viewer reads the ledger and finds no way to change it."""

from __future__ import annotations

import re
import subprocess

import pytest
from playwright.async_api import Page, expect

from gateway.core.console.roles import Role
from tests.browser.conftest import NewPage
from tests.browser.harness import Console, Seeded
from tests.browser.pages import log_in
from tests.support.cli import GATEWAY
from tests.support.processes import clean_env

MERCHANT = "m_browser"


def open_account(console: Console, merchant_id: str) -> None:
    """`gateway ledger open-account`, as an operator opens a merchant's account."""
    done = subprocess.run(
        [GATEWAY, "ledger", "open-account", merchant_id, "--currency", "USD",
         "--config", str(console.config)],
        capture_output=True, text=True, timeout=60, env=clean_env(), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


async def fill_adjustment(page: Page, amount: str, adj_id: str) -> None:
    """The form, field by field, by its labels; then its button."""
    main = page.locator("main")
    await main.get_by_label("Merchant", exact=True).fill(MERCHANT)
    await main.get_by_label("Currency", exact=True).fill("USD")
    await main.get_by_label(re.compile(r"^Amount")).fill(amount)
    await main.get_by_label(re.compile(r"^Reason")).fill("duplicate capture, ticket 812")
    await main.get_by_label(re.compile(r"^Id")).fill(adj_id)
    await main.get_by_role("button", name="Post the adjustment").click()


@pytest.mark.parametrize("js", [True, False], ids=["javascript", "no-javascript"])
async def test_an_operator_adjusts_a_merchant_and_reads_the_statement(
    console: Console, seeded: Seeded, new_page: NewPage, js: bool
) -> None:
    open_account(console, MERCHANT)
    page, guard = await new_page(java_script_enabled=js)
    guard.allow("409")  # Chromium logs the refused reuse of an id as a failed load
    await log_in(page, console, Role.OPERATOR)
    main = page.locator("main")

    await page.get_by_role("link", name="Ledger", exact=True).click()
    await expect(page.get_by_role("heading", level=1)).to_contain_text("balances")
    row = main.get_by_role("row").filter(has_text=MERCHANT)
    await expect(row).to_contain_text("0.00 USD")
    await expect(row).not_to_contain_text("negative")

    await main.get_by_role("link", name="Adjust", exact=True).click()
    await fill_adjustment(page, "-12.50", "adj-b1")
    await expect(main.get_by_role("heading", name="Adjustment posted")).to_be_visible()
    await expect(main.get_by_role("status")).to_have_text(
        f"adjustment adj-b1: -12.50 USD to {MERCHANT}, posted"
    )
    await expect(main.locator("#adjusted-transfer")).to_contain_text(
        "debit_adjustment of -12.50 USD"
    )
    await expect(main.locator("#adjusted-balance")).to_have_text(
        re.compile(r"-12\.50 USD\s+negative")
    )

    # The same id with another amount: refused, said why, and nothing moved.
    await fill_adjustment(page, "-13.00", "adj-b1")
    await expect(main.get_by_role("alert")).to_contain_text("'adj-b1' was used for -12.50 USD")
    await expect(main.get_by_label(re.compile(r"^Amount"))).to_have_value("-13.00")

    await main.get_by_role("link", name="Statement", exact=True).click()
    await main.get_by_label("Merchant", exact=True).fill(MERCHANT)
    await main.get_by_role("button", name="Show statement").click()
    await expect(main.locator("#opening")).to_have_text("0.00 USD")
    await expect(main.locator("#closing")).to_have_text("-12.50 USD")
    await expect(main.locator("#ledger-balance")).to_contain_text("-12.50 USD, as the closing")
    line = main.locator("#statement tbody").get_by_role("row").filter(has_text="debit_adjustment")
    await expect(line).to_contain_text("operator")
    await expect(line).to_contain_text("adjustment:adj-b1")

    await page.get_by_role("link", name="Balances", exact=True).click()
    await expect(main.get_by_role("row").filter(has_text=MERCHANT)).to_contain_text("negative")
    await page.get_by_role("link", name="Overview", exact=True).click()
    await expect(page.locator("#negative-merchants")).to_contain_text("1 merchant account")


async def test_a_viewer_reads_the_ledger_and_cannot_adjust_it(
    console: Console, seeded: Seeded, new_page: NewPage
) -> None:
    open_account(console, MERCHANT)
    page, guard = await new_page()
    guard.allow("403")  # Chromium logs the refusal the test asks for as a failed load
    await log_in(page, console, Role.VIEWER)
    await page.get_by_role("link", name="Ledger", exact=True).click()
    main = page.locator("main")
    await expect(main.get_by_role("row").filter(has_text=MERCHANT)).to_be_visible()
    await expect(main.get_by_role("link", name="Adjust", exact=True)).to_have_count(0)
    refused = await page.goto(console.url("/console/ledger/adjust"))
    assert refused is not None and refused.status == 403
    await expect(main).to_contain_text(re.compile(r"operator", re.IGNORECASE))
