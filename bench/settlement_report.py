"""The settlement benchmark's checks and its printed summary."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from bench.report import check
from bench.servers import Backend
from bench.settlement_backlog import Payment, expected_merchant_total, expected_transfers
from bench.settlement_ledger import LEDGER_NAMES, ledger_facts
from gateway.settings import Settings
from tests.support.ordering_property import summary, violations

TARGET_EVENTS_PER_S = 10_000
#: Settlement with ordering on against off, on the same backlog in the same run.
ORDERING_TARGET_RATIO = 0.8


async def _table_facts(dsn: str) -> dict[str, int]:
    """The gateway's own tables: settlement rows and dead letters."""
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(
            "SELECT (SELECT count(*) FROM settlements WHERE state = 'settled') AS settled,"
            " (SELECT count(*) FROM settlements) AS settlements,"
            " (SELECT count(*) FROM dlq_webhooks) AS dlq_rows"
        )
    finally:
        await conn.close()
    return {k: int(v) for k, v in dict(row or {}).items()}


async def _ordering_facts(dsn: str) -> tuple[list[str], int, int, int]:
    """The ordering property's breaches, the keys applied, the keys held, and the keys
    whose last numbered event is not applied."""
    conn = await asyncpg.connect(dsn)
    try:
        broken = await violations(conn)
        seen = await summary(conn)
    finally:
        await conn.close()
    return broken, seen.keys, seen.held, seen.behind


def verify(backend: Backend, settings: Settings, payments: list[Payment]) -> list[dict[str, Any]]:
    """Exactly once, balanced, nothing parked: the checks of one drain.

    The ledger is read through the gateway's `Ledger` port, so the same checks hold on
    either backend; settlement rows and dead letters are the gateway's own tables.
    """
    events = len(payments)
    currency = settings.settlement.currency
    expected = expected_transfers(payments, currency)
    merchants = sorted({p.merchant_id for p in payments})
    ledger = asyncio.run(ledger_facts(settings, merchants, expected))
    facts = asyncio.run(_table_facts(backend.dsn))
    total = expected_merchant_total(payments, currency)
    distinct = len({e.id for e in expected})
    one_each = ledger.transfers_as_computed == distinct == events
    one_each_detail = (
        f"{ledger.transfers_as_computed:,} of {events:,} events' transfers found with "
        f"their accounts and amount ({ledger.transfers_missing:,} missing)"
    )
    return [
        check("one transfer per event", one_each, one_each_detail),
        check("every settlement settled", facts["settled"] == facts["settlements"] == events,
               f"{facts['settled']:,} settled of {facts['settlements']:,} rows"),
        check("no dead letters", facts["dlq_rows"] == 0, f"{facts['dlq_rows']} DLQ rows"),
        check("ledger balanced (Ledger.check)", ledger.balanced,
               f"debits {ledger.debits_posted:,} "
               f"{'=' if ledger.balanced else '!='} credits {ledger.credits_posted:,}"),
        check("merchants hold captures minus refunds, converted once",
               ledger.merchants_total == total,
               f"{ledger.merchants_total:,} in the ledger, {total:,} computed"),
    ] + (_ordering_checks(backend) if settings.ordering.enabled else [])  # fmt: skip


def _ordering_checks(backend: Backend) -> list[dict[str, Any]]:
    broken, keys, held, behind = asyncio.run(_ordering_facts(backend.dsn))
    return [
        check("ordering property holds", not broken,
              f"{keys:,} keys checked; " + ("; ".join(broken[:3]) or "no breach")),
        check("every key applied to its last event", held == behind == 0,
              f"{held} held, {behind} behind"),
    ]  # fmt: skip


def ordering_table(result: dict[str, Any]) -> str:
    """Ordering off against on, printed after `--ordering both`."""
    off, on = result["off"], result["on"]
    pairs = result.get("pairs", [])
    spread = ", ".join(f"{r:.2f}" for r in pairs)
    verdict = "PASS" if result["passed"] else "FAIL"
    return "\n".join(
        [
            f"ordering off: {off['events_per_s']:,.0f} events/s "
            f"({off['drain_events_per_s']:,.0f}/s after start-up), worker "
            f"{off['worker_cpu_us_per_event']} µs/event, postgres "
            f"{off['postgres_db_cpu_us_per_event']} µs/event",
            f"ordering on ({on['keys']:,} keys): {on['events_per_s']:,.0f} events/s "
            f"({on['drain_events_per_s']:,.0f}/s after start-up), worker "
            f"{on['worker_cpu_us_per_event']} µs/event, postgres "
            f"{on['postgres_db_cpu_us_per_event']} µs/event",
            f"on / off: {result['on_over_off']:.2f} (target >= {ORDERING_TARGET_RATIO}): {verdict}"
            + (f" (median of {len(pairs)} pairs: {spread})" if len(pairs) > 1 else ""),
        ]
    )


def table(result: dict[str, Any]) -> str:
    """The short summary printed after a run."""
    rows = [
        ("ledger", LEDGER_NAMES[result.get("ledger", "postgres")]),
        ("events (refunds)", f"{result['events']:,} ({result['refunds']:,})"),
        ("ordering", f"on, {result['keys']:,} keys" if result.get("ordering") else "off"),
        ("wall time from worker start", f"{result['wall_s']} s"),
        (f"events/s (target >= {TARGET_EVENTS_PER_S:,})", f"{result['events_per_s']:,.0f}"),
        ("events/s after start-up", f"{result['drain_events_per_s']:,.0f} "
         f"(start-up {result['startup_s']} s)"),
        ("worker CPU per event", f"{result['worker_cpu_us_per_event']} µs "
         f"({result['worker_cpu_pct']} % of a core)"),
        ("postgres CPU per event (this db)", f"{result['postgres_db_cpu_us_per_event']} µs"),
        ("postgres / nats / machine CPU", f"{result['postgres_cpu_pct']} % / "
         f"{result['nats_cpu_pct']} % / {result['machine_busy_pct']} % (200 % = 2 cores)"),
    ]  # fmt: skip
    if "tigerbeetle_cpu_pct" in result:
        rows.append(("tigerbeetle CPU (local server)", f"{result['tigerbeetle_cpu_pct']} %"))
    width = max(len(r[0]) for r in rows)
    lines = [f"{name:<{width}}  {value}" for name, value in rows]
    lines += [
        f"[{'ok' if c['ok'] else 'FAIL'}] {c['check']}: {c['detail']}" for c in result["checks"]
    ]
    verdict = "PASS" if result["passed"] else "FAIL"
    lines.append(f"settlement target (>= {TARGET_EVENTS_PER_S:,} events/s, checks ok): {verdict}")
    return "\n".join(lines)
