"""What the browser tests do on a page: watch it for anything a hostile payload could
make run, log in as a person does, and ask axe-core what it finds."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from playwright.async_api import ConsoleMessage, Dialog, Error, Page, expect

from gateway.core.console.roles import Role
from tests.browser.harness import AXE, Console

#: The login form's button, however it is worded.
LOG_IN = re.compile(r"^(log in|sign in)$", re.IGNORECASE)
#: axe-core's impacts that fail the accessibility tests.
BLOCKING_IMPACTS = ("serious", "critical")


@dataclass
class Guard:
    """Every dialog (`alert(1)` from an escaped payload that was not), uncaught script
    error and console error a page raised; `assert_clean` fails on any not allowed."""

    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    allowed: list[str] = field(default_factory=list)

    @classmethod
    def watch(cls, page: Page) -> Guard:
        guard = cls()
        page.on("dialog", guard._on_dialog)
        page.on("console", guard._on_console)
        page.on("pageerror", guard._on_page_error)
        return guard

    async def _on_dialog(self, dialog: Dialog) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        await dialog.dismiss()

    def _on_console(self, message: ConsoleMessage) -> None:
        # A CSP violation (an inline script or style) is logged here as an error too.
        url = str(message.location.get("url", ""))
        # Chromium asks for /favicon.ico by itself; the console has none to give.
        if message.type == "error" and not url.endswith("/favicon.ico"):
            self.errors.append(f"{message.text} ({url})")

    def _on_page_error(self, error: Error) -> None:
        self.errors.append(f"uncaught: {error.message}")

    def allow(self, fragment: str) -> None:
        """Accept console errors containing `fragment` (a 403 the test asked for is logged
        by Chromium as a failed resource load)."""
        self.allowed.append(fragment)

    def assert_clean(self) -> None:
        assert self.dialogs == [], f"a script ran: {self.dialogs}"
        unexpected = [e for e in self.errors if not any(a in e for a in self.allowed)]
        assert unexpected == [], f"console errors: {unexpected}"


async def log_in(page: Page, console: Console, role: Role, next_path: str = "") -> None:
    """Through the login form, with the role's token typed into its labelled field."""
    suffix = f"?next={next_path}" if next_path else ""
    await page.goto(console.url("/console/login" + suffix))
    await page.get_by_label(re.compile("token", re.IGNORECASE)).fill(console.tokens[role])
    await page.get_by_role("button", name=LOG_IN).click()
    await expect(page).not_to_have_url(re.compile(r"/console/login"))


async def status_of(page: Page, path: str, console: Console) -> int:
    """Navigate to `path`; the status the console answered."""
    response = await page.goto(console.url(path))
    assert response is not None
    return response.status


async def blocking_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it is now. The page's
    context must be made with `bypass_csp=True`: the console's CSP admits only its own
    scripts, and axe-core is injected from tests/browser/node_modules for this check."""
    assert AXE.exists(), f"{AXE} is missing: run `make setup` (npm ci --prefix tests/browser)"
    await page.add_script_tag(path=str(AXE))
    result: dict[str, Any] = await page.evaluate(
        "async () => await axe.run(document, {resultTypes: ['violations']})"
    )
    return [
        {
            "id": v["id"],
            "impact": v["impact"],
            "help": v["help"],
            "nodes": [n["target"] for n in v["nodes"]][:5],
        }
        for v in result["violations"]
        if v["impact"] in BLOCKING_IMPACTS
    ]
