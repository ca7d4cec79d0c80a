"""The console in a real browser (headless Chromium from Debian's package, through
Playwright), against the real `gateway console` and `gateway dlq run-jobs` processes:
an operator's runbook from finding a parked row to replaying it, with and without
JavaScript, what a viewer may not do, and a cross-site form post refused.

Every page is watched for dialogs, uncaught errors and console errors (a CSP violation is
one): the hostile payload must appear as text, and nothing it carries may run.
"""

from __future__ import annotations

import re

import asyncpg
import pytest
from playwright.async_api import Page, expect

from gateway.core.console.roles import Role
from tests.browser.conftest import NewPage
from tests.browser.cross_site import serving_page
from tests.browser.harness import HOSTILE_EVENT, IMG, SCRIPT, Console, Seeded
from tests.browser.pages import log_in

#: The hostile strings as a pretty-printed JSON document shows them (`"` escaped).
IMG_IN_JSON = IMG.replace('"', '\\"')


async def find_row(page: Page, search: str) -> None:
    """Dead letters → the text filter → submit (Enter in the field submits the GET form)."""
    await page.get_by_role("link", name="Dead letters", exact=True).click()
    await expect(page.get_by_role("heading", level=1)).to_contain_text("Dead letters")
    field = page.get_by_label(re.compile(r"^(search|text|id or message)", re.IGNORECASE))
    await field.fill(search)
    await field.press("Enter")
    await expect(page).to_have_url(re.compile(re.escape(search)))


async def open_stack(page: Page) -> None:
    """Unfold the collapsible error detail, where it is folded."""
    summary = page.locator("details > summary").filter(
        has_text=re.compile(r"stack|trace|error detail", re.IGNORECASE)
    )
    if await summary.count() and not await summary.first.evaluate("s => s.parentElement.open"):
        await summary.first.click()


async def test_find_a_parked_row_and_read_its_stack_and_hostile_payload(
    console: Console, seeded: Seeded, new_page: NewPage
) -> None:
    page, _ = await new_page()
    await log_in(page, console, Role.INVESTIGATOR)
    await find_row(page, HOSTILE_EVENT)
    rows = page.get_by_role("row").filter(has_text=HOSTILE_EVENT)
    await expect(rows).to_have_count(1)
    # The hostile error message is listed as text, too.
    await expect(rows.first).to_contain_text(SCRIPT)
    await rows.first.get_by_role("link").first.click()
    await expect(page).to_have_url(re.compile(rf"/console/dlq/{seeded.hostile_id}$"))

    await open_stack(page)
    await expect(page.get_by_text("Traceback (most recent call last)").first).to_be_visible()
    await expect(page.get_by_text("LookupError").first).to_be_visible()
    await expect(page.get_by_text(SCRIPT).first).to_be_visible()
    await expect(page.get_by_text(IMG_IN_JSON).first).to_be_visible()
    # Nothing the payload carries became markup.
    assert await page.locator("img[src='x']").count() == 0
    scripts = await page.eval_on_selector_all("script", "ss => ss.map(s => s.textContent)")
    assert not any("alert" in (s or "") for s in scripts)
    html = await page.content()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


PROGRESS = """el => [Number(el.getAttribute('aria-valuenow') ?? el.value),
                    Number(el.getAttribute('aria-valuemax') ?? el.max)]"""


async def progress(page: Page) -> tuple[float, float]:
    """The job's progress bar (role progressbar): (value, maximum)."""
    now, top = await page.get_by_role("progressbar").first.evaluate(PROGRESS)
    return float(now), float(top)


async def run_the_replay(page: Page, console: Console, seeded: Seeded, *, js: bool) -> None:
    """The runbook: find the parked Stripe row, plan its replay, start it, watch it end."""
    await log_in(page, console, Role.OPERATOR)
    # The filters an operator narrows a fault down with: its stage and its sender.
    await page.get_by_role("link", name="Dead letters", exact=True).click()
    await page.get_by_label("ingest", exact=True).check()
    await page.get_by_label("Provider", exact=True).fill("stripe")
    await page.get_by_role("button", name="Filter", exact=True).click()
    await expect(page).to_have_url(re.compile(r"stage=ingest.*provider=stripe"))
    main = page.locator("main")
    listed = main.locator("tbody").get_by_role("row")
    await expect(listed).to_have_count(1)
    await expect(listed).to_contain_text(seeded.stripe_event)
    await main.get_by_role("link", name=re.compile(r"plan a replay", re.IGNORECASE)).click()
    await expect(page).to_have_url(re.compile(r"/console/replays/new"))
    # The planner shows the plan the CLI's dry run prints: the one row, in order.
    await expect(main.get_by_role("row").filter(has_text=seeded.stripe_event).first).to_be_visible()
    await main.get_by_role("button", name=re.compile(r"^start", re.IGNORECASE)).click()
    await expect(page).to_have_url(re.compile(r"/console/replays/\d+$"))
    # The job is a row, waiting: nothing runs it until the runner is started.
    assert await progress(page) == (0, 1)
    await expect(main.get_by_text(re.compile(r"State:\s*planned", re.IGNORECASE))).to_be_visible()
    navigations: list[str] = []
    page.on("framenavigated", lambda f: navigations.append(f.url) if f == page.main_frame else None)
    console.start_runner()
    for _ in range(60):
        now, top = await progress(page)
        if now == top == 1:
            break
        await page.wait_for_timeout(500)
        if not js:
            await page.reload()  # without JavaScript, the operator reloads
    assert await progress(page) == (1, 1)
    if js:
        assert navigations == []  # htmx's polling moved the bar: the page was not reloaded
    await expect(main.get_by_text(re.compile(r"State:\s*done", re.IGNORECASE))).to_be_visible()
    await page.reload()  # htmx refreshes the status block only, not the items table
    items = main.get_by_role("row").filter(has_text=f"dead letter {seeded.stripe_id}")
    await expect(items).to_contain_text("replayed")


async def assert_replayed_and_audited(page: Page, console: Console, seeded: Seeded) -> None:
    conn = await asyncpg.connect(console.database_url)
    try:
        row = await conn.fetchrow(
            "SELECT is_resolved, resolution FROM dlq_webhooks WHERE id = $1", seeded.stripe_id
        )
    finally:
        await conn.close()
    assert row is not None and row["is_resolved"] and row["resolution"] == "replayed"
    await page.goto(console.url(f"/console/dlq/{seeded.stripe_id}"))
    await expect(page.locator("main")).to_contain_text(re.compile("replayed", re.IGNORECASE))
    await page.get_by_role("link", name="Audit", exact=True).click()
    entry = page.get_by_role("row").filter(has_text="console:operator")
    # Who started the replay, and of what: the job's creation, with its target.
    await expect(entry.filter(has_text="replay.create").first).to_be_visible()


@pytest.mark.parametrize("js", [True, False], ids=["javascript", "no-javascript"])
async def test_plan_a_replay_start_it_and_watch_it_finish(
    console: Console, seeded: Seeded, new_page: NewPage, js: bool
) -> None:
    page, _ = await new_page(java_script_enabled=js)
    await run_the_replay(page, console, seeded, js=js)
    await assert_replayed_and_audited(page, console, seeded)


#: Builds and submits a POST form to /console/replays in the page (the CSP admits a form
#: posted to the console itself; it refuses a script's fetch).
POST_FORM = """fields => {
  const form = document.createElement('form');
  form.method = 'post';
  form.action = '/console/replays';
  for (const [name, value] of Object.entries(fields)) {
    const input = document.createElement('input');
    input.type = 'hidden'; input.name = name; input.value = value;
    form.appendChild(input);
  }
  document.body.appendChild(form);
  form.submit();
}"""


async def count_jobs(console: Console) -> int:
    conn = await asyncpg.connect(console.database_url)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM replay_jobs"))
    finally:
        await conn.close()


async def test_a_viewer_sees_no_payload_and_is_refused_a_replay(
    console: Console, seeded: Seeded, new_page: NewPage
) -> None:
    page, guard = await new_page()
    guard.allow("403")  # Chromium logs the refusal the test asks for as a failed load
    await log_in(page, console, Role.VIEWER)
    await page.goto(console.url(f"/console/dlq/{seeded.hostile_id}"))
    await expect(page.get_by_role("heading", level=1)).to_be_visible()
    main = page.locator("main")
    await expect(main).to_contain_text(HOSTILE_EVENT)
    # The payload's keys and its JSON-escaped text are nowhere (the error message, which
    # is metadata, carries the hostile text too).
    await expect(main).not_to_contain_text('"note"')
    await expect(main).not_to_contain_text(IMG_IN_JSON)
    await expect(main).not_to_contain_text("Traceback")  # the stack needs investigator too
    await expect(main).to_contain_text(re.compile(r"investigator", re.IGNORECASE))

    planner = await page.goto(console.url(f"/console/replays/new?ids={seeded.stripe_id}"))
    assert planner is not None and planner.status == 403
    # The form post an operator's planner makes, from the console's own origin.
    async with page.expect_navigation() as refused:
        await page.evaluate(POST_FORM, {"kind": "dlq", "ids": str(seeded.stripe_id)})
    answer = await refused.value
    assert answer is not None and answer.status == 403
    assert await count_jobs(console) == 0
    download = await page.request.get(console.url(f"/console/dlq/{seeded.hostile_id}/payload"))
    assert download.status == 403


@pytest.mark.parametrize(
    "host", ["localhost", "127.0.0.1"], ids=["cross-site", "same-site-other-port"]
)
async def test_a_form_posted_from_another_site_is_refused(
    console: Console, seeded: Seeded, new_page: NewPage, host: str
) -> None:
    """A page elsewhere auto-submits a resolve form to the console while an operator is
    logged in: refused with 403, the row stays open, and the refusal is audited."""
    page, guard = await new_page()
    guard.allow("403")
    await log_in(page, console, Role.OPERATOR)
    target = console.url(f"/console/dlq/{seeded.hostile_id}/resolve")
    with serving_page(host, target, {"note": "resolved by a stranger"}) as evil:
        async with page.expect_response(target) as answer:
            await page.goto(evil)
        response = await answer.value
    assert response.status == 403
    conn = await asyncpg.connect(console.database_url)
    try:
        resolved = await conn.fetchval(
            "SELECT is_resolved FROM dlq_webhooks WHERE id = $1", seeded.hostile_id
        )
        refusals = await conn.fetch(
            "SELECT actor, detail FROM console_audit WHERE action = 'csrf.refused'"
        )
    finally:
        await conn.close()
    assert resolved is False
    assert len(refusals) == 1
    if host == "127.0.0.1":  # same-site: the SameSite=Strict cookie went along
        assert refusals[0]["actor"] == "console:operator"


async def test_a_second_submit_of_the_same_plan_starts_no_second_job(
    console: Console, seeded: Seeded, new_page: NewPage
) -> None:
    """Back to the planner and Start again (the form carries its Idempotency-Key): the
    same job, not a second one."""
    page, _ = await new_page(java_script_enabled=False)
    await log_in(page, console, Role.OPERATOR)
    await page.goto(console.url(f"/console/replays/new?kind=dlq&id={seeded.stripe_id}"))
    start = page.locator("main").get_by_role("button", name=re.compile(r"^start", re.I))
    await start.click()
    await expect(page).to_have_url(re.compile(r"/console/replays/\d+$"))
    first = page.url
    await page.go_back()
    await expect(page).to_have_url(re.compile(r"/console/replays/new"))
    await start.click()
    await expect(page).to_have_url(re.compile(r"/console/replays/\d+$"))
    assert page.url == first
    assert await count_jobs(console) == 1
