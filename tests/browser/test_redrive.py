"""The re-drive after an outage, in a real browser (issue 42 #13): with the
currency-service stopped, a real `gateway settle` parks a EUR payment as
RATE_UNAVAILABLE; the service is started again and a real `gateway dlq run-jobs`
replays the row by itself. The operator's dead-letter page shows the row resolved by a
replay, its automatic replay counted, and the audit row written with `via = auto`."""

from __future__ import annotations

import re
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


async def _value(dsn: str, sql: str, *args: object) -> object:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(sql, *args)
    finally:
        await conn.close()


async def test_a_row_parked_in_an_outage_is_re_driven_and_the_page_says_so(
    tmp_path: Path, console: Console, new_page: NewPage, database_url: str, nats_url: str
) -> None:
    stub_port = free_port()
    doc = config(
        database_url,
        nats_url,
        **settlement_sections(f"http://127.0.0.1:{stub_port}", REDIS_URL),
        ordering={"enabled": False},
        dlq={"auto_replay_interval_s": 0.5, "auto_replay_classes": ["RATE_UNAVAILABLE"]},
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
    runner = Process(["dlq", "run-jobs", "--config", str(cfg)], tmp_path / "run-jobs.log")
    settle.start()
    try:
        async with running_server(doc) as server:
            body = payment("evt_redrive", "pi_redrive", 1000, currency="eur")
            assert await post_stripe(server, "evt_redrive", body) == "accepted"
            parked = (
                "SELECT id FROM dlq_webhooks WHERE event_id = 'evt_redrive'"
                " AND error_class = 'RATE_UNAVAILABLE'"
            )
            row_id = await wait_until(lambda: _value(database_url, parked), timeout_s=30)

            page, _ = await new_page()
            await log_in(page, console, Role.OPERATOR)
            await page.goto(console.url(f"/console/dlq/{row_id}"))
            fields = page.locator("section[aria-labelledby='fields-heading']")
            await expect(fields.get_by_role("row").filter(has_text="State")).to_contain_text("open")
            await expect(fields).not_to_contain_text("Automatic replays")

            stub.start()  # the service is back; the runner replays the row by itself
            runner.start()
            resolved = "SELECT is_resolved FROM dlq_webhooks WHERE id = $1"
            await wait_until(lambda: _value(database_url, resolved, row_id), timeout_s=45)
            settled = "SELECT count(*) FROM settlements WHERE state = 'settled'"
            assert await _value(database_url, settled) == 1

            await page.reload()
            state = fields.get_by_role("row").filter(has_text="State")
            await expect(state).to_contain_text("resolved (replayed)")
            automatic = fields.get_by_role("row").filter(has_text="Automatic replays")
            await expect(automatic.locator("td")).to_contain_text(re.compile(r"^1\b"))
            trail = page.locator("section[aria-labelledby='audit-heading']")
            entry = trail.get_by_role("row").filter(has_text="gateway:auto-replay")
            await expect(entry).to_have_count(1)
            await expect(entry).to_contain_text("auto")
            await expect(entry).to_contain_text("dlq.replay")
            await expect(entry).to_contain_text("ok")
    finally:
        runner.stop()
        stub.stop()
        settle.stop()
