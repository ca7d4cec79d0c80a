"""Screenshots of every console page for the documentation, taken in headless Chromium
against the real console: with nothing parked (empty), with the browser tests' rows
(typical), and with 10,000 more (large).

    python -m tests.browser.screenshots [OUT_DIR]     # default: docs/images/console

`make screenshots` runs it into docs/images/console/; `make test` runs it into .data/
before it builds the docs, so every run proves it without changing the committed images. It needs
PostgreSQL (TEST_POSTGRES_DSN, as the tests) and Chromium; each data set gets a database
of its own, dropped afterwards.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
from playwright.async_api import Browser, Page, async_playwright

from gateway.adapters.postgres import migrate
from gateway.core.console.roles import Role
from tests.browser.harness import (
    CHROMIUM,
    ROOT,
    Console,
    Seeded,
    chromium_args,
    running_console,
    seed,
    seed_many,
)
from tests.browser.pages import log_in
from tests.support.nats import NatsServer
from tests.support.services import create_database, drop_database, unique_name

OUT = ROOT / "docs" / "images" / "console"
VIEWPORT = {"width": 1280, "height": 860}
MAX_HEIGHT_PX = 2400
#: The error class the runbook's screenshots follow (the hostile row's).
RUNBOOK_CLASS = "UNKNOWN_MERCHANT"
#: Rows added for the large data set.
MANY = 10_000


@dataclass(frozen=True)
class Shot:
    name: str  # the file's name, without the data set's prefix and ".png"
    path: str


def pages(seeded: Seeded | None, job_id: int | None, event_row: int | None) -> Iterator[Shot]:
    """Every page, with the ids the data set has."""
    yield Shot("overview", "/console/")
    yield Shot("dead-letters", "/console/dlq")
    yield Shot("dead-letter-groups", "/console/dlq/groups")
    yield Shot("replay-jobs", "/console/replays")
    yield Shot("events", "/console/events")
    yield Shot("held-keys", "/console/keys")
    yield Shot("audit", "/console/audit")
    yield Shot("tokens", "/console/tokens")
    if seeded is not None:
        # The runbook's steps: one error class's rows, one of them, and their replay plan.
        yield Shot("dead-letters-filtered", f"/console/dlq?error_class={RUNBOOK_CLASS}")
        yield Shot("dead-letter", f"/console/dlq/{seeded.hostile_id}")
        yield Shot("replay-planner", f"/console/replays/new?kind=dlq&error_class={RUNBOOK_CLASS}")
    if job_id is not None:
        yield Shot("replay-job", f"/console/replays/{job_id}")
    if event_row is not None:
        yield Shot("event", f"/console/events/{event_row}")


async def replay_the_stripe_row(page: Page, console: Console, seeded: Seeded) -> int | None:
    """Plan and start the Stripe row's replay through the planner; the job's id."""
    await page.goto(console.url(f"/console/replays/new?ids={seeded.stripe_id}"))
    start = page.get_by_role("button", name=re.compile(r"^start", re.IGNORECASE))
    if not await start.count():
        return None
    await start.first.click()
    await page.wait_for_url("**/console/replays/*")
    tail = page.url.rstrip("/").rsplit("/", 1)[-1]
    return int(tail) if tail.isdigit() else None


async def job_finished(database_url: str, job_id: int, timeout_s: float = 30.0) -> None:
    """Until `gateway dlq run-jobs` has finished the job (its page then shows the end)."""
    conn = await asyncpg.connect(database_url)
    try:
        for _ in range(int(timeout_s / 0.2)):
            state = await conn.fetchval("SELECT state FROM replay_jobs WHERE id = $1", job_id)
            if state in ("done", "failed", "cancelled"):
                return
            await asyncio.sleep(0.2)
    finally:
        await conn.close()


async def event_row_of(database_url: str, event_id: str) -> int | None:
    conn = await asyncpg.connect(database_url)
    try:
        found = await conn.fetchval(
            "SELECT id FROM processed_webhooks WHERE event_id = $1", event_id
        )
        return int(found) if found is not None else None
    finally:
        await conn.close()


async def shoot(page: Page, console: Console, shot: Shot, out: Path, prefix: str) -> str:
    response = await page.goto(console.url(shot.path))
    status = response.status if response is not None else 0
    if status != 200:
        return f"skipped {prefix}-{shot.name}: {shot.path} answered {status}"
    # The whole page, up to MAX_HEIGHT_PX: a long table's first screens show what it is.
    height = min(await page.evaluate("document.documentElement.scrollHeight"), MAX_HEIGHT_PX)
    clip = {"x": 0, "y": 0, "width": VIEWPORT["width"], "height": height}
    await page.screenshot(
        path=str(out / f"{prefix}-{shot.name}.png"),
        full_page=True,
        clip=clip,  # type: ignore[arg-type]
    )
    return f"wrote {prefix}-{shot.name}.png"


async def shoot_all(
    browser: Browser, console: Console, seeded: Seeded | None, out: Path, prefix: str
) -> list[str]:
    context = await browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    page = await context.new_page()
    done: list[str] = []
    if prefix == "empty":
        await page.goto(console.url("/console/login"))
        await page.screenshot(path=str(out / "login.png"))
        done.append("wrote login.png")
    await log_in(page, console, Role.ADMIN)
    job_id = event_row = None
    if seeded is not None:
        console.start_runner()
        job_id = await replay_the_stripe_row(page, console, seeded)
        if job_id is not None:
            await job_finished(console.database_url, job_id)
        event_row = await event_row_of(console.database_url, seeded.stripe_event)
    for shot in pages(seeded, job_id, event_row):
        done.append(await shoot(page, console, shot, out, prefix))
    await context.close()
    return done


async def data_set(browser: Browser, out: Path, prefix: str, nats_url: str) -> list[str]:
    """One data set's screenshots, in a database of its own."""
    name = unique_name("gw_shots")
    database_url = await create_database(name)
    try:
        await migrate(database_url)
        seeded = None if prefix == "empty" else await seed(database_url, nats_url)
        if prefix == "large":
            await seed_many(database_url, MANY)
        with (
            tempfile.TemporaryDirectory(prefix="gw-shots-") as work,
            running_console(Path(work), database_url, nats_url) as console,
        ):
            return await shoot_all(browser, console, seeded, out, prefix)
    finally:
        await drop_database(name)


async def main(out: Path) -> int:
    if not CHROMIUM.exists():
        print(f"screenshots: {CHROMIUM} is missing (make setup installs it)", file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    # The parking gateway's own warning ("event accepted and parked") is expected here.
    logging.getLogger("gateway").setLevel(logging.ERROR)
    nats = NatsServer()
    nats.start()
    try:
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=chromium_args()
            )
            try:
                for prefix in ("empty", "typical", "large"):
                    for line in await data_set(browser, out, prefix, nats.url):
                        print(f"screenshots: {line}")
            finally:
                await browser.close()
    finally:
        nats.cleanup()
    return 0


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    sys.exit(asyncio.run(main(target)))
