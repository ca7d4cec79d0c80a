"""The overview during a dependency outage, in a real browser (issue 42 #12): with the
currency-service stopped, a real `gateway settle` retries a EUR payment; the operator's
overview shows it in retry under RATE_UNAVAILABLE and the currency-service down with
since when. Meanwhile Mollie's API is down too: a webhook waits 15 min for its confirm
fetch, and the overview says so, flagged. The service is started again: the payment
settles and the overview shows the service up and nothing in retry; the fetch done, the
confirm backlog is gone from the page."""

from __future__ import annotations

import subprocess
from pathlib import Path

import asyncpg
from playwright.async_api import expect

from gateway.core.console.roles import Role
from tests.browser.conftest import NewPage
from tests.browser.harness import Console, Process
from tests.browser.pages import log_in
from tests.integration.settlement.test_settlement import payment, post_stripe
from tests.support.cli import GATEWAY
from tests.support.config_file import write_toml
from tests.support.gateway import config, running_server
from tests.support.processes import clean_env
from tests.support.services import REDIS_URL, free_port, wait_until
from tests.support.settlement import settlement_sections


async def _value(dsn: str, sql: str) -> object:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(sql)
    finally:
        await conn.close()


# A Mollie webhook recorded 15 min ago whose fetch from Mollie's API is still owed.
_OWED_FETCH = """
WITH w AS (
    INSERT INTO processed_webhooks (provider, event_id, body, received_at)
    VALUES ('mollie', 'tr_outage', 'id=tr_outage', now() - interval '15 minutes')
    RETURNING id
)
INSERT INTO confirmations (webhook_id, provider, created_at, pending_since)
SELECT id, 'mollie', now() - interval '15 minutes', now() - interval '15 minutes' FROM w
RETURNING webhook_id
"""


async def test_the_overview_shows_an_outage_and_its_retries_before_rows_park(
    tmp_path: Path, console: Console, new_page: NewPage, database_url: str, nats_url: str
) -> None:
    stub_port = free_port()
    doc = config(
        database_url,
        nats_url,
        # Retries every 2 s for about half a minute: long enough to look, short enough
        # that the payment settles soon after the service is back.
        **settlement_sections(
            f"http://127.0.0.1:{stub_port}", REDIS_URL, currency={"retry_delays_s": [2.0] * 15}
        ),
        ordering={"enabled": False},
    )
    cfg = write_toml(tmp_path / "settle.toml", doc)
    opened = subprocess.run(
        [GATEWAY, "ledger", "open-account", "m_1", "--currency", "USD", "--config", str(cfg)],
        capture_output=True, text=True, timeout=60, env=clean_env(), check=False,
    )  # fmt: skip
    assert opened.returncode == 0, opened.stderr
    settle = Process(["settle", "--config", str(cfg)], tmp_path / "settle.log")
    stub = Process(
        ["currency-stub", "--host", "127.0.0.1", "--port", str(stub_port)], tmp_path / "stub.log"
    )
    settle.start()
    try:
        async with running_server(doc) as server:
            body = payment("evt_outage", "pi_outage", 1000, currency="eur")
            assert await post_stripe(server, "evt_outage", body) == "accepted"
            in_retry = (
                "SELECT count(*) FROM settlement_retries WHERE error_class = 'RATE_UNAVAILABLE'"
            )
            await wait_until(lambda: _value(database_url, in_retry), timeout_s=30)

            await _value(database_url, _OWED_FETCH)

            page, _ = await new_page()
            await log_in(page, console, Role.OPERATOR)
            await page.goto(console.url("/console/"))
            owed = page.locator("#confirm-pending")
            await expect(owed).to_have_class("highlighted")  # past the alert's 10 min
            await expect(owed.locator('li[data-provider="mollie"]')).to_have_text(
                "mollie — 1 webhook, oldest 15 min over 10 min: the confirm backlog alert fires"
            )
            currency = page.locator('#dependencies tr[data-dependency="currency-service"]')
            await expect(currency).to_have_attribute("data-state", "down")
            await expect(currency.locator(".state")).to_contain_text("down")
            since = await currency.locator(".since time").inner_text()
            assert since.endswith(" UTC") and since[:4].isdigit(), since
            row = page.locator('#in-retry tr[data-error-class="RATE_UNAVAILABLE"]')
            await expect(row.locator("td").nth(0)).to_have_text("currency-service")
            await expect(row.locator("td.num")).to_have_text("1")
            await expect(page.locator("#in-retry-total")).to_have_text("1")

            stub.start()  # the service is back: the next retry settles the payment
            settled = "SELECT count(*) FROM settlements WHERE state = 'settled'"
            await wait_until(lambda: _value(database_url, settled), timeout_s=45)
            up = (
                "SELECT count(*) FROM dependency_state"
                " WHERE dependency = 'currency-service' AND state = 'up'"
            )
            await wait_until(lambda: _value(database_url, up), timeout_s=10)
            gone = "SELECT count(*) = 0 FROM settlement_retries"
            await wait_until(lambda: _value(database_url, gone), timeout_s=10)
            await _value(database_url, "UPDATE confirmations SET state = 'confirmed'")
            await page.reload()
            await expect(owed).to_have_count(0)
            await expect(currency).to_have_attribute("data-state", "up")
            await expect(page.locator("#in-retry-total")).to_have_text("0")
            await expect(page.locator("#in-retry")).to_contain_text("No event is being retried.")
    finally:
        stub.stop()
        settle.stop()
