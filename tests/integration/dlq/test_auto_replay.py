"""Automatic re-drive for real (finding #13): payments parked as RATE_UNAVAILABLE while the
currency-service was down settle once it answers again, without a person, each exactly
once and audited with `via = auto`; a row at its cap and a row of a class no dependency's
return cures stay parked; while the service is still down nothing is tried."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from gateway import settings as settings_mod
from gateway.core.console.roles import Role
from gateway.dlq.auto_replay import AutoReplayer, auto_replayer
from gateway.wiring import ops
from tests.integration.settlement.test_settlement import payment, post_stripe
from tests.support.console import ConsoleHarness, console, console_factory
from tests.support.gateway import config, running_server
from tests.support.services import wait_until
from tests.support.settlement import (
    merchant_balance,
    open_merchant,
    running_worker,
    settlement_sections,
)
from tests.support.stub import Stub

__all__ = ["console", "console_factory"]  # the console's fixtures, on this test's database

#: 1000 EUR cents at the stub's EUR/USD 1.08.
SETTLED_USD = 1080


@pytest.fixture
def doc(database_url: str, nats_url: str, stub: Stub, redis_url: str) -> dict[str, Any]:
    sections = settlement_sections(stub.url, redis_url)
    sections["dlq"] = {"auto_replay_max": 2, "auto_replay_backoff_s": 0.01}
    return config(database_url, nats_url, **sections)


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


@contextlib.asynccontextmanager
async def redrive(doc: dict[str, Any]) -> AsyncIterator[AutoReplayer]:
    """The re-drive `gateway dlq run-jobs` runs, on resources of its own."""
    settings = settings_mod.parse(doc, env={})
    async with ops.replay_resources(settings) as ctx, auto_replayer(ctx) as auto:
        yield auto


async def open_rows(db: asyncpg.Connection) -> dict[str, asyncpg.Record]:
    rows = await db.fetch(
        "SELECT id, event_id, error_class, is_resolved, resolution, auto_replays, attempts"
        " FROM dlq_webhooks ORDER BY id"
    )
    return {r["event_id"]: r for r in rows}


async def audit(db: asyncpg.Connection) -> list[tuple[str, str, str, str]]:
    rows = await db.fetch(
        "SELECT target, via, action, outcome FROM console_audit WHERE via = 'auto' ORDER BY id"
    )
    return [(r["target"], r["via"], r["action"], r["outcome"]) for r in rows]


async def test_payments_parked_while_the_rates_were_down_settle_once_it_answers(
    doc: dict[str, Any], stub: Stub, db: asyncpg.Connection, console: ConsoleHarness
) -> None:
    await stub.control(mode="fail")
    events = ("evt_a1", "evt_a2", "evt_cap", "evt_perm")
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "m_1")
        for n, event_id in enumerate(events):
            await post_stripe(server, event_id, payment(event_id, f"pi_{n}", 1000))

        async def parked() -> bool:
            return len(await db.fetch("SELECT 1 FROM dlq_webhooks")) == len(events)

        await wait_until(parked, timeout_s=30)
        before = await open_rows(db)
        assert {r["error_class"] for r in before.values()} == {"RATE_UNAVAILABLE"}
        # One row has spent its automatic replays; one was parked for a reason no
        # dependency's return cures (were it re-driven, it would settle: the test sees it).
        await db.execute("UPDATE dlq_webhooks SET auto_replays = 2 WHERE event_id = 'evt_cap'")
        await db.execute(
            "UPDATE dlq_webhooks SET error_class = 'UNKNOWN_MERCHANT' WHERE event_id = 'evt_perm'"
        )

        async with redrive(doc) as auto:
            # Still down: the probe says so and no row is tried.
            waiting = await auto.round()
            assert waiting.outcomes == {} and waiting.answering == frozenset()
            unchanged = await open_rows(db)
            assert not any(r["is_resolved"] for r in unchanged.values())
            assert {e: r["attempts"] for e, r in unchanged.items()} == {
                e: r["attempts"] for e, r in before.items()
            }
            assert {e: r["auto_replays"] for e, r in unchanged.items()} == {
                "evt_a1": 0,
                "evt_a2": 0,
                "evt_cap": 2,
                "evt_perm": 0,
            }
            assert await audit(db) == []

            await stub.control(mode="ok")
            first = await auto.round()
            again = await auto.round()  # nothing left: each row resolved once
            metrics = auto.ctx.metrics

        after = await open_rows(db)
        assert first.replayed == 2 and again.outcomes == {}
        for event_id in ("evt_a1", "evt_a2"):
            row = after[event_id]
            assert (row["is_resolved"], row["resolution"], row["auto_replays"]) == (
                True,
                "replayed",
                1,
            )
        assert (after["evt_cap"]["is_resolved"], after["evt_cap"]["auto_replays"]) == (False, 2)
        assert (after["evt_perm"]["is_resolved"], after["evt_perm"]["auto_replays"]) == (False, 0)
        assert await merchant_balance(parts, "m_1") == 2 * SETTLED_USD
        ids = {e: after[e]["id"] for e in ("evt_a1", "evt_a2")}
        assert sorted(await audit(db)) == sorted(
            [
                (f"dlq:{ids['evt_a1']}", "auto", "dlq.replay", "ok"),
                (f"dlq:{ids['evt_a2']}", "auto", "dlq.replay", "ok"),
            ]
        )
        assert (
            metrics.dlq_auto_replays_total.get(error_class="RATE_UNAVAILABLE", outcome="replayed")
            == 2
        )

    # The console's page of a re-driven row says so, with its audit row.
    page = await console.client(Role.VIEWER).get(f"/console/dlq/{ids['evt_a1']}")
    assert page.status_code == 200
    text = page.text
    assert "Automatic replays</th><td>1 " in text
    assert "gateway:auto-replay (-, auto)" in text and "dlq.replay" in text
    capped = await console.client(Role.VIEWER).get(f"/console/dlq/{after['evt_cap']['id']}")
    assert "Automatic replays</th><td>2 " in capped.text
    assert "gateway:auto-replay" not in capped.text  # counted by hand above, never audited


async def test_auto_replay_off_leaves_the_rows_to_a_person(
    doc: dict[str, Any], stub: Stub, db: asyncpg.Connection
) -> None:
    """`[dlq] auto_replay_classes` without RATE_UNAVAILABLE: the dependency answers, the
    row stays parked and unaudited."""
    doc["dlq"] = {"auto_replay_classes": ["LEDGER_UNAVAILABLE"]}
    await stub.control(mode="fail")
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "m_1")
        await post_stripe(server, "evt_b1", payment("evt_b1", "pi_b1", 1000))

        async def parked() -> bool:
            return len(await db.fetch("SELECT 1 FROM dlq_webhooks")) == 1

        await wait_until(parked, timeout_s=30)
        await stub.control(mode="ok")
        async with redrive(doc) as auto:
            report = await auto.round()
        assert report.outcomes == {}
        row = (await open_rows(db))["evt_b1"]
        assert (row["is_resolved"], row["auto_replays"]) == (False, 0)
        assert await merchant_balance(parts, "m_1") in (None, 0)
        assert await audit(db) == []
