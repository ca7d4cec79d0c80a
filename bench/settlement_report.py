"""The settlement benchmark's checks and its printed summary."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import asyncpg

from bench.report import check
from bench.servers import ROOT, Backend
from bench.settlement_backlog import Payment, expected_merchant_total

TARGET_EVENTS_PER_S = 3_000


async def _facts(dsn: str) -> dict[str, int]:
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(
            "SELECT (SELECT count(*) FROM ledger_transfers) AS transfers,"
            " (SELECT count(*) FROM settlements WHERE state = 'settled') AS settled,"
            " (SELECT count(*) FROM settlements) AS settlements,"
            " (SELECT count(*) FROM dlq_webhooks) AS dlq_rows,"
            " (SELECT coalesce(sum(credits_posted - debits_posted), 0) FROM ledger_accounts"
            "  WHERE code = 1) AS merchants_total"
        )
    finally:
        await conn.close()
    return {k: int(v) for k, v in dict(row or {}).items()}


def verify(
    backend: Backend,
    config: Path,
    payments: list[Payment],
    ledger_currency: str,
    gateway: list[str],
) -> list[dict[str, Any]]:
    """Exactly once, balanced, nothing parked: the checks of one drain."""
    facts = asyncio.run(_facts(backend.dsn))
    events = len(payments)
    expected = expected_merchant_total(payments, ledger_currency)
    ledger_check = subprocess.run(
        [*gateway, "ledger", "--config", str(config), "check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return [
        check("one transfer per event", facts["transfers"] == events,
               f"{facts['transfers']:,} transfers for {events:,} events"),
        check("every settlement settled", facts["settled"] == facts["settlements"] == events,
               f"{facts['settled']:,} settled of {facts['settlements']:,} rows"),
        check("no dead letters", facts["dlq_rows"] == 0, f"{facts['dlq_rows']} DLQ rows"),
        check("gateway ledger check", ledger_check.returncode == 0,
               (ledger_check.stdout or ledger_check.stderr).strip()),
        check("merchants hold captures minus refunds, converted once",
               facts["merchants_total"] == expected,
               f"{facts['merchants_total']:,} in the ledger, {expected:,} computed"),
    ]  # fmt: skip


def table(result: dict[str, Any]) -> str:
    """The short summary printed after a run."""
    rows = [
        ("events (refunds)", f"{result['events']:,} ({result['refunds']:,})"),
        ("wall time from worker start", f"{result['wall_s']} s"),
        ("events/s (target >= 3,000)", f"{result['events_per_s']:,.0f}"),
        ("events/s after start-up", f"{result['drain_events_per_s']:,.0f} "
         f"(start-up {result['startup_s']} s)"),
        ("worker CPU per event", f"{result['worker_cpu_us_per_event']} µs "
         f"({result['worker_cpu_pct']} % of a core)"),
        ("postgres CPU per event (this db)", f"{result['postgres_db_cpu_us_per_event']} µs"),
        ("postgres / nats / machine CPU", f"{result['postgres_cpu_pct']} % / "
         f"{result['nats_cpu_pct']} % / {result['machine_busy_pct']} % (200 % = 2 cores)"),
    ]  # fmt: skip
    width = max(len(r[0]) for r in rows)
    lines = [f"{name:<{width}}  {value}" for name, value in rows]
    lines += [
        f"[{'ok' if c['ok'] else 'FAIL'}] {c['check']}: {c['detail']}" for c in result["checks"]
    ]
    verdict = "PASS" if result["passed"] else "FAIL"
    lines.append(f"settlement target (>= {TARGET_EVENTS_PER_S:,} events/s, checks ok): {verdict}")
    return "\n".join(lines)
