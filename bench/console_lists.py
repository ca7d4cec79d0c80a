"""The console's lists at scale: a fresh database filled with 1,000,000 dead letters and
10,000,000 events, then the p95 latency of the first page and of a deep-cursor page of
the dead-letter and event list APIs (and of the overview), and the EXPLAIN plans that
show each is read along an index.

    python -m bench.console_lists [--events 10000000] [--dead-letters 1000000]
                                  [--requests 50] [--keep] [--reuse DBNAME]
                                  [--no-latency-targets]

The rows are made in PostgreSQL by `bench.console_fill` (its docstring says how they
spread). Requests go through the whole console app (bearer authentication, the route,
the adapter, JSON) over httpx's ASGI transport, one at a time; the figures are per
request. The exit status is 1 when a list page's p95 is over the target or one of its
statements reads a big table without an index; with `--no-latency-targets` only the
plans decide it (the p95s are still printed, a slow one still marked SLOW), for a run
on a machine whose timings say nothing, such as a loaded CI runner.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx

from bench.console_fill import EVENT_DAYS, TABLES, fill
from bench.e2e_figures import percentile
from gateway.adapters.postgres import create_pool, migrate
from gateway.adapters.postgres.console.events import search_sql
from gateway.adapters.postgres.dead_letters import pages as dlq_pages
from gateway.console.app import build_app
from gateway.console.token_admin import issue
from gateway.console.web import ConsoleDeps
from gateway.core.dlq.filters import filter_from_query
from gateway.core.dlq.pages import decode_cursor
from gateway.core.events.search import parse_event_search
from gateway.core.keyset import Keyset, encode_cursor
from gateway.settings import parse
from tests.support.services import ADMIN_DSN, create_database, drop_database, unique_name

#: The issue's target for every list page.
P95_TARGET_MS = 200.0


@dataclass(frozen=True)
class Case:
    name: str
    path: str
    params: dict[str, str]
    # The statements the page runs, each as [sql, *args] (None: not a list page).
    explain: Callable[[], list[list[Any]]] | None


async def _keyset(pool: asyncpg.Pool, sql: str, *args: Any) -> Keyset:
    row = await pool.fetchrow(sql, *args)
    if row is None:
        raise SystemExit(f"no row for a deep cursor: {sql}")
    return Keyset(row[0], int(row[1]))


async def cases(pool: asyncpg.Pool, now: datetime) -> list[Case]:
    """The pages measured: first and deep, unfiltered and by one sender."""
    since = (now - timedelta(days=EVENT_DAYS)).isoformat()
    until = (now + timedelta(seconds=1)).isoformat()
    open_rows = int(await pool.fetchval("SELECT count(*) FROM dlq_webhooks WHERE NOT is_resolved"))
    deep_open = await _keyset(
        pool,
        "SELECT first_failed_at, id FROM dlq_webhooks WHERE NOT is_resolved"
        " ORDER BY first_failed_at, id OFFSET $1 LIMIT 1",
        int(open_rows * 0.9),
    )
    deep_stripe = await _keyset(
        pool,
        "SELECT first_failed_at, id FROM dlq_webhooks WHERE NOT is_resolved"
        " AND stage = 'settlement' AND provider = 'stripe'"
        " ORDER BY first_failed_at, id OFFSET $1 LIMIT 1",
        int(open_rows * 0.9 * 0.7 * 0.5),
    )
    events = int(await pool.fetchval("SELECT coalesce(max(id), 0) FROM processed_webhooks"))
    deep_event = await _keyset(
        pool, "SELECT received_at, id FROM processed_webhooks WHERE id = $1", max(1, events // 10)
    )
    deep_github = await _keyset(
        pool,
        "SELECT received_at, id FROM processed_webhooks WHERE provider = 'github' AND id <= $1"
        " ORDER BY id DESC LIMIT 1",
        max(1, events // 10),
    )

    def dlq(params: dict[str, str]) -> Callable[[], list[list[Any]]]:
        def sql() -> list[list[Any]]:
            # The page, and the count of matching rows it shows (capped at 10,001).
            f = filter_from_query(now, {k: [v] for k, v in params.items() if k != "cursor"})
            page = dlq_pages.page_query(f, decode_cursor(params.get("cursor")), 50)
            return [page, dlq_pages.count_query(f)]

        return sql

    def ev(params: dict[str, str]) -> Callable[[], list[list[Any]]]:
        def sql() -> list[list[Any]]:
            text, args = search_sql(parse_event_search({k: [v] for k, v in params.items()}, now))
            return [[text, *args]]

        return sql

    stripe = {"stage": "settlement", "provider": "stripe"}
    window = {"since": since, "until": until}
    made = [
        ("dead letters, first page (open)", "/console/api/v1/dlq", {}),
        ("dead letters, deep cursor (90 %)", "/console/api/v1/dlq",
         {"cursor": encode_cursor(deep_open)}),
        ("dead letters settlement/stripe, first page", "/console/api/v1/dlq", stripe),
        ("dead letters settlement/stripe, deep cursor", "/console/api/v1/dlq",
         {**stripe, "cursor": encode_cursor(deep_stripe)}),
        ("events 30 days, first page", "/console/api/v1/events", window),
        ("events 30 days, deep cursor (90 %)", "/console/api/v1/events",
         {**window, "cursor": encode_cursor(deep_event)}),
        ("events github 30 days, first page", "/console/api/v1/events",
         {**window, "provider": "github"}),
        ("events github 30 days, deep cursor", "/console/api/v1/events",
         {**window, "provider": "github", "cursor": encode_cursor(deep_github)}),
        ("events default 24 h, first page", "/console/api/v1/events", {}),
        # A sender with no event at all: nothing to find, and it must not cost a walk of
        # the whole window to say so.
        ("events of a silent sender, 30 days", "/console/api/v1/events",
         {**window, "provider": "legacy"}),
    ]  # fmt: skip
    found = [
        Case(name, path, params, (dlq if "dlq" in path else ev)(params))
        for name, path, params in made
    ]
    found.append(Case("overview", "/console/api/v1/stats/overview", {}, None))
    return found


async def measure(client: httpx.AsyncClient, case: Case, requests: int) -> list[float]:
    for _ in range(3):  # warm the caches and the prepared statements
        r = await client.get(case.path, params=case.params)
        if r.status_code != 200:
            raise SystemExit(f"{case.name}: {r.status_code} {r.text[:300]}")
    times_ms: list[float] = []
    for _ in range(requests):
        started = time.perf_counter()
        r = await client.get(case.path, params=case.params)
        times_ms.append((time.perf_counter() - started) * 1000)
        if r.status_code != 200:
            raise SystemExit(f"{case.name}: {r.status_code} {r.text[:300]}")
    return times_ms


async def explain(pool: asyncpg.Pool, case: Case) -> tuple[str, bool]:
    """The plans of the page's statements as run (EXPLAIN ANALYZE), and whether each
    reads the big tables along an index only (no sequential scan of them)."""
    assert case.explain is not None
    plans, indexed = [], True
    async with pool.acquire() as conn:
        for sql, *args in case.explain():
            rows = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql, *args)
            plan = "\n".join(r[0] for r in rows)
            indexed &= "Index" in plan and not any(f"Seq Scan on {t}" in plan for t in TABLES)
            plans.append(plan)
    return "\n\n".join(plans), indexed


async def overview_plans(pool: asyncpg.Pool, now: datetime) -> list[tuple[str, str]]:
    """The overview's own statements on the same data (the console's newest-event step
    per sender, the hourly growth): their plans, to show they use indexes too."""
    from gateway.adapters.postgres.console import stats

    senders = ["stripe", "adyen", "github", "paddle", "service:billing", "silent"]
    first_hour = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=23)
    statements: list[tuple[str, str, list[Any]]] = [
        ("newest event per sender", stats._LAST_EVENTS, [senders]),
        ("dead letters added and resolved per hour", stats._GROWTH, [now, first_hour, 300.0]),
        ("open dead letters by stage", stats._OPEN_BY_STAGE, []),
        ("oldest open dead letter", stats._OLDEST_OPEN, []),
    ]
    plans = []
    async with pool.acquire() as conn:
        for name, sql, args in statements:
            rows = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql, *args)
            plans.append((name, "\n".join(r[0] for r in rows)))
    return plans


async def run(args: argparse.Namespace) -> int:
    name = args.reuse or unique_name("gw_bench_console")
    dsn = ADMIN_DSN.rpartition("/")[0] + "/" + name
    now = datetime.now(UTC).replace(microsecond=0)
    if not args.reuse:
        await create_database(name)
        await migrate(dsn)
        started = time.monotonic()
        await fill(dsn, args.events, args.dead_letters, now)
        print(f"fill done in {time.monotonic() - started:.0f} s", flush=True)
    pool = await create_pool(dsn, max_size=4, command_timeout_s=60)
    if args.reuse:  # the fill's own clock: its newest event arrived then
        now = await pool.fetchval("SELECT max(received_at) FROM processed_webhooks") or now
    failures = 0
    try:
        sizes = await pool.fetch(
            "SELECT relname, reltuples::bigint AS n,"
            " pg_size_pretty(pg_total_relation_size(oid)) AS size FROM pg_class"
            " WHERE relname = ANY($1::text[])",
            list(TABLES),
        )
        for r in sizes:
            print(f"{r['relname']}: ~{r['n']:,} rows, {r['size']} with indexes")
        settings = parse(
            {
                "database": {"url": dsn},
                "nats": {"url": "nats://127.0.0.1:1"},
                "providers": {
                    p: {"scheme": "stripe", "secrets": [f"whsec_{p}"]}
                    for p in ("stripe", "adyen", "github", "paddle")
                },
                "services": {
                    "billing": {"token": "bench-billing", "subjects": ["events.billing.>"]}
                },
            },
            env={},
        )
        deps = ConsoleDeps(pool=pool, settings=settings, now=lambda: now)
        async with pool.acquire() as conn:
            token = await issue(
                conn, name=unique_name("bench")[:60], role="viewer", created_by="bench",
                now=now, expires_in=None,
            )  # fmt: skip
        transport = httpx.ASGITransport(app=build_app(deps))
        async with httpx.AsyncClient(
            transport=transport,
            base_url="http://127.0.0.1:8070",
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        ) as client:
            print(f"\n{'case':<46} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}  plan")
            found = await cases(pool, now)
            plans: list[tuple[str, str]] = []
            for case in found:
                times_ms = await measure(client, case, args.requests)
                p95 = percentile(times_ms, 95)
                if p95 is None:
                    raise SystemExit(f"no request measured for {case.name}")
                verdict = "-"
                if case.explain is not None:
                    plan, indexed = await explain(pool, case)
                    plans.append((case.name, plan))
                    verdict = "index" if indexed else "NO INDEX"
                    failures += not indexed
                slow = case.explain is not None and p95 > P95_TARGET_MS
                failures += slow and args.latency_targets
                print(
                    f"{case.name:<46} {statistics.median(times_ms):8.1f} {p95:8.1f}"
                    f" {max(times_ms):8.1f}  {verdict}{'  SLOW' if slow else ''}",
                    flush=True,
                )
        judged = "" if args.latency_targets else ", not judged in this run"
        print(
            f"\n(target for the list pages: p95 under {P95_TARGET_MS:.0f} ms{judged};"
            f" {args.requests} requests each; the overview has none, its plans follow)"
        )
        for case_name, plan in plans + await overview_plans(pool, now):
            print(f"\n--- {case_name}\n{plan}")
    finally:
        await pool.close()
        if not args.keep and not args.reuse:
            await drop_database(name)
        elif not args.reuse:
            print(f"\nkept database {name} (--reuse {name} measures it again)")
    return 1 if failures else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--dead-letters", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=50, help="requests per case")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--reuse", metavar="DBNAME", help="measure a kept database again")
    parser.add_argument(
        "--no-latency-targets",
        dest="latency_targets",
        action="store_false",
        help="print the p95s but let only the plans decide the exit status",
    )
    raise SystemExit(asyncio.run(run(parser.parse_args())))


if __name__ == "__main__":
    main()
