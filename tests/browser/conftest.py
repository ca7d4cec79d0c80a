"""Fixtures of the browser tests: headless Chromium (Debian's, through Playwright), a
seeded console with a token per role, and pages that fail the test on any dialog, script
error or console error they see."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from playwright.async_api import Browser, BrowserContext, Page, async_playwright

from tests.browser.harness import CHROMIUM, Console, Seeded, chromium_args, running_console, seed
from tests.browser.pages import Guard

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the browser tests, saying why, only where Debian's chromium is absent:
    scripts/setup.sh installs it (`make test`), and Playwright's own download is unused."""
    if CHROMIUM.exists():
        return
    missing = pytest.mark.skip(
        reason=f"{CHROMIUM} is missing: run `make setup` (apt-get install chromium)"
    )
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(missing)


NewPage = Callable[..., Awaitable[tuple[Page, Guard]]]


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as pw:
        launched = await pw.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=chromium_args()
        )
        yield launched
        await launched.close()


@pytest.fixture
async def seeded(database_url: str, nats_url: str) -> Seeded:
    return await seed(database_url, nats_url)


@pytest.fixture
async def console(
    tmp_path: Path, database_url: str, nats_url: str, seeded: Seeded
) -> AsyncIterator[Console]:
    with running_console(tmp_path, database_url, nats_url) as running:
        yield running


@pytest.fixture
async def new_page(browser: Browser) -> AsyncIterator[NewPage]:
    """`await new_page(java_script_enabled=..., ...)`: a page in a fresh context (its own
    cookies) and the guard watching it; every guard is checked when the test ends."""
    contexts: list[BrowserContext] = []
    guards: list[Guard] = []

    async def make(**options: object) -> tuple[Page, Guard]:
        context = await browser.new_context(**options)  # type: ignore[arg-type]
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = await context.new_page()
        guard = Guard.watch(page)
        guards.append(guard)
        return page, guard

    yield make
    for context in contexts:
        await context.close()
    for guard in guards:
        guard.assert_clean()
