"""Accessibility in a real browser: axe-core finds no serious or critical violation on any
page of the console, and an operator can log in and resolve a row with the keyboard
alone, seeing where the focus is at every step."""

from __future__ import annotations

import re
from typing import Any

import asyncpg
import httpx
from playwright.async_api import Page, expect

from gateway.core.console.roles import Role
from tests.browser.conftest import NewPage
from tests.browser.harness import HOSTILE_EVENT, Console, Seeded
from tests.browser.pages import blocking_violations, log_in
from tests.browser.test_ledger import open_account


async def webhook_id(console: Console, event_id: str) -> int:
    conn = await asyncpg.connect(console.database_url)
    try:
        return int(
            await conn.fetchval("SELECT id FROM processed_webhooks WHERE event_id = $1", event_id)
        )
    finally:
        await conn.close()


def start_job(console: Console, dlq_id: int) -> int:
    """A replay job made through the API, so its page has something to show."""
    answer = httpx.post(
        console.url("/console/api/v1/replays"),
        json={"kind": "dlq", "ids": [dlq_id], "dry_run": False},
        headers={"Authorization": f"Bearer {console.tokens[Role.OPERATOR]}"},
        timeout=30,
    )
    assert answer.status_code == 202, answer.text
    return int(answer.json()["job_id"])


def adjust_merchant(console: Console, merchant_id: str) -> None:
    """The merchant's account opened, then taken below zero through the API."""
    open_account(console, merchant_id)
    answer = httpx.post(
        console.url("/console/api/v1/ledger/adjustments"),
        json={"merchant_id": merchant_id, "amount_minor": -1250, "currency": "USD",
              "reason": "accessibility", "adjustment_id": "a11y-1"},
        headers={"Authorization": f"Bearer {console.tokens[Role.OPERATOR]}"},
        timeout=30,
    )  # fmt: skip
    assert answer.status_code == 200, answer.text


def console_pages(seeded: Seeded, job_id: int, event_row: int) -> list[str]:
    """Every page of the console, as an admin sees it."""
    return [
        "/console/",
        "/console/dlq",
        f"/console/dlq?search={HOSTILE_EVENT}",
        "/console/dlq/groups",
        f"/console/dlq/{seeded.hostile_id}",
        f"/console/replays/new?ids={seeded.other_ids[0]}",
        "/console/replays",
        f"/console/replays/{job_id}",
        "/console/events",
        f"/console/events/{event_row}",
        "/console/keys",
        "/console/ledger",
        "/console/ledger/statement?merchant=m_1",
        "/console/ledger/transfers",
        "/console/ledger/adjust",
        "/console/audit",
        "/console/tokens",
    ]


async def test_no_serious_or_critical_violation_on_any_page(
    console: Console, seeded: Seeded, new_page: NewPage
) -> None:
    # bypass_csp: the console's CSP admits only its own scripts, and axe-core is injected
    # from tests/browser/node_modules for this check alone (the other tests keep the CSP).
    page, guard = await new_page(bypass_csp=True)
    guard.allow("403")
    found: dict[str, Any] = {}
    await page.goto(console.url("/console/login"))
    found["/console/login"] = await blocking_violations(page)
    await log_in(page, console, Role.ADMIN)
    job_id = start_job(console, seeded.stripe_id)
    event_row = await webhook_id(console, seeded.stripe_event)
    adjust_merchant(console, "m_1")  # the ledger pages' tables have a row to show
    for path in console_pages(seeded, job_id, event_row):
        response = await page.goto(console.url(path))
        assert response is not None
        if response.status != 200:
            found[path] = f"status {response.status}"
            continue
        found[path] = await blocking_violations(page)
    # The refusal page, as a viewer meets it.
    viewer, viewer_guard = await new_page(bypass_csp=True)
    viewer_guard.allow("403")
    await log_in(viewer, console, Role.VIEWER)
    refused = await viewer.goto(console.url("/console/tokens"))
    assert refused is not None and refused.status == 403
    found["/console/tokens (viewer: 403)"] = await blocking_violations(viewer)
    shown = await viewer.goto(console.url(f"/console/dlq/{seeded.hostile_id}"))
    assert shown is not None and shown.status == 200
    found["/console/dlq/ID (viewer: no payload)"] = await blocking_violations(viewer)
    failing = {path: v for path, v in found.items() if v}
    assert failing == {}, f"pages with problems: {failing}"


FOCUSED = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const style = getComputedStyle(el);
  const labels = el.labels ? Array.from(el.labels).map(l => l.textContent).join(' ') : '';
  return {
    tag: el.tagName.toLowerCase(),
    text: (el.getAttribute('aria-label') || labels || el.textContent || el.value || '').trim(),
    ring: style.outlineStyle !== 'none' || style.boxShadow !== 'none',
  };
}"""


async def tab_to(
    page: Page, tag: str | tuple[str, ...], text: re.Pattern[str], limit: int = 80
) -> None:
    """Press Tab until the focus is on a `tag` whose name matches `text`; every element
    passed on the way must show where the focus is (an outline or a ring)."""
    seen: list[str] = []
    for _ in range(limit):
        await page.keyboard.press("Tab")
        focused = await page.evaluate(FOCUSED)
        if focused is None:
            continue
        seen.append(f"{focused['tag']}:{focused['text'][:30]}")
        assert focused["ring"], f"no visible focus on {seen[-1]}"
        tags = (tag,) if isinstance(tag, str) else tag
        if focused["tag"] in tags and text.search(focused["text"]):
            return
    raise AssertionError(f"no {tag} matching {text.pattern} within {limit} tabs: {seen}")


async def test_log_in_and_resolve_a_row_with_the_keyboard_alone(
    console: Console, seeded: Seeded, new_page: NewPage
) -> None:
    page, _ = await new_page()
    await page.goto(console.url("/console/login"))
    await tab_to(page, "input", re.compile("token", re.IGNORECASE))
    await page.keyboard.type(console.tokens[Role.OPERATOR])
    await page.keyboard.press("Enter")
    await expect(page).not_to_have_url(re.compile("/console/login"))

    await tab_to(page, "a", re.compile(r"^Dead letters$"))
    await page.keyboard.press("Enter")
    await expect(page).to_have_url(re.compile(r"/console/dlq"))
    await tab_to(page, "input", re.compile(r"search|text|id or message", re.IGNORECASE))
    await page.keyboard.type(HOSTILE_EVENT)
    await page.keyboard.press("Enter")
    await expect(page).to_have_url(re.compile(HOSTILE_EVENT))
    await tab_to(page, "a", re.compile(rf"{HOSTILE_EVENT}|^{seeded.hostile_id}$"))
    await page.keyboard.press("Enter")
    await expect(page).to_have_url(re.compile(rf"/console/dlq/{seeded.hostile_id}$"))

    await tab_to(page, ("textarea", "input"), re.compile(r"note", re.IGNORECASE))
    await page.keyboard.type("merchant onboarded; settled by hand")
    await tab_to(page, "button", re.compile(r"^resolve", re.IGNORECASE))
    await page.keyboard.press("Enter")
    await expect(page.locator("main")).to_contain_text("merchant onboarded; settled by hand")
    conn = await asyncpg.connect(console.database_url)
    try:
        row = await conn.fetchrow(
            "SELECT is_resolved, resolved_by, resolution_note FROM dlq_webhooks WHERE id = $1",
            seeded.hostile_id,
        )
    finally:
        await conn.close()
    assert row is not None and row["is_resolved"]
    assert row["resolved_by"] == "console:operator"
    assert row["resolution_note"] == "merchant onboarded; settled by hand"


async def test_plan_start_and_cancel_a_replay_and_log_out_with_the_keyboard_alone(
    console: Console, seeded: Seeded, new_page: NewPage
) -> None:
    page, _ = await new_page()
    await page.goto(console.url(f"/console/login?next=/console/dlq/{seeded.stripe_id}"))
    await tab_to(page, "input", re.compile("token", re.IGNORECASE))
    await page.keyboard.type(console.tokens[Role.OPERATOR])
    await page.keyboard.press("Enter")
    await expect(page).to_have_url(re.compile(rf"/console/dlq/{seeded.stripe_id}$"))
    await tab_to(page, "a", re.compile(r"plan a replay", re.IGNORECASE))
    await page.keyboard.press("Enter")
    await expect(page).to_have_url(re.compile(r"/console/replays/new"))
    await tab_to(page, "button", re.compile(r"^start", re.IGNORECASE))
    await page.keyboard.press("Enter")
    await expect(page).to_have_url(re.compile(r"/console/replays/\d+$"))
    await expect(page.get_by_role("heading", level=1)).to_contain_text("Replay job")
    # No runner is started: the job waits, and the operator thinks better of it.
    await tab_to(page, "button", re.compile(r"^cancel$", re.IGNORECASE))
    await page.keyboard.press("Enter")
    await expect(page.get_by_text(re.compile(r"State:\s*cancelled"))).to_be_visible()
    conn = await asyncpg.connect(console.database_url)
    try:
        jobs = await conn.fetch("SELECT created_by, total, state FROM replay_jobs")
    finally:
        await conn.close()
    assert [tuple(j) for j in jobs] == [("console:operator", 1, "cancelled")]
    await tab_to(page, "button", re.compile(r"^log out$", re.IGNORECASE))
    await page.keyboard.press("Enter")
    await expect(page).to_have_url(re.compile(r"/console/login"))
