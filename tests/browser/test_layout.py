"""The console fits a 1280 px window: the event log with long ids and types, the
dead-letter list with its severity and amount columns, and a replay job's page, none
wider than the window (no horizontal scrolling). A clean job's counts read across:
"Replayed 2", "Failed 0", never a number under the wrong heading."""

from __future__ import annotations

import asyncpg
import orjson
import pytest
from playwright.async_api import Page, expect

from gateway.core.console.roles import Role
from tests.browser.conftest import NewPage
from tests.browser.harness import Console, Seeded
from tests.browser.pages import log_in

VIEWPORT = {"width": 1280, "height": 900}
#: Ids and types as long as providers send: one unbroken token each.
LONG_ID = "evt_" + "9f3c2a7b" * 14
LONG_TYPE = "checkout.session.async_payment_succeeded.for_connected_account_" + "x" * 30
#: The page is as wide as the window: nothing scrolls sideways.
OVERFLOW = "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"


async def assert_fits(page: Page) -> None:
    scroll_w, client_w = await page.evaluate(OVERFLOW)
    assert client_w == VIEWPORT["width"] or client_w > 1200  # the window, less a scrollbar
    assert scroll_w <= client_w, f"{page.url} is {scroll_w} px wide in a {client_w} px window"


async def seed_layout(database_url: str) -> int:
    """Events with long ids and types, and a replay job that replayed two rows cleanly;
    the job's id."""
    conn = await asyncpg.connect(database_url)
    try:
        for n in range(3):
            event_id = f"{LONG_ID}{n}"
            await conn.execute(
                "INSERT INTO processed_webhooks (provider, event_id, event_type, subject,"
                " headers, body, received_at, body_sha256)"
                " VALUES ('stripe', $1, $2, $3, '{}'::jsonb, $4, now(), sha256($4))",
                event_id,
                LONG_TYPE,
                f"webhooks.stripe.{LONG_TYPE}",
                orjson.dumps({"id": event_id, "type": LONG_TYPE}),
            )
        job: int = await conn.fetchval(
            "INSERT INTO replay_jobs (kind, state, created_by, request, total, started_at,"
            " finished_at) VALUES ('dlq', 'done', 'console:operator', '{\"ids\": [1, 2]}',"
            " 2, now(), now()) RETURNING id"
        )
        await conn.execute(
            "INSERT INTO replay_job_items (job_id, position, dlq_id, state, done_at)"
            " SELECT $1, p, p + 1, 'replayed', now() FROM generate_series(0, 1) AS p",
            job,
        )
    finally:
        await conn.close()
    return job


@pytest.mark.parametrize("role", [Role.OPERATOR, Role.VIEWER])
async def test_the_event_log_and_the_dead_letters_fit_1280_px(
    console: Console, seeded: Seeded, new_page: NewPage, role: Role
) -> None:
    await seed_layout(console.database_url)
    page, _ = await new_page(viewport=VIEWPORT)
    await log_in(page, console, role)
    await page.goto(console.url("/console/events"))
    rows = page.locator("main tbody").get_by_role("row")
    await expect(rows.filter(has_text=LONG_TYPE)).to_have_count(3)
    await assert_fits(page)
    await page.goto(console.url("/console/dlq"))
    table = page.locator("main table").first
    await expect(table.get_by_role("columnheader", name="Severity")).to_be_visible()
    await expect(table.get_by_role("columnheader", name="Amount")).to_be_visible()
    # LEDGER_UNAVAILABLE: the ledger's outcome unknown, marked critical in words.
    ledger_down = table.get_by_role("row").filter(has_text="evt_ledger_down")
    await expect(ledger_down).to_contain_text("critical")
    await assert_fits(page)


async def test_a_clean_jobs_counts_read_across_and_fit_1280_px(
    console: Console, seeded: Seeded, new_page: NewPage
) -> None:
    job = await seed_layout(console.database_url)
    page, _ = await new_page(viewport=VIEWPORT)
    await log_in(page, console, Role.OPERATOR)
    await page.goto(console.url(f"/console/replays/{job}"))
    counts = page.get_by_role("table", name="Items by state")
    # Each state is a row header beside its own count.
    for state, count in (("Pending", "0"), ("Replayed", "2"), ("Failed", "0"), ("Skipped", "0")):
        row = counts.get_by_role("row", name=state)
        await expect(row.get_by_role("rowheader")).to_have_text(state)
        await expect(row.get_by_role("cell")).to_have_text(count)
    # A count's cell sits on its heading's line, not under another column.
    replayed = counts.get_by_role("row", name="Replayed")
    head = await replayed.get_by_role("rowheader").bounding_box()
    cell = await replayed.get_by_role("cell").bounding_box()
    assert head is not None and cell is not None
    assert abs(head["y"] - cell["y"]) < 2 and cell["x"] > head["x"]
    await assert_fits(page)
