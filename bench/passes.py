"""One pass of wrk against one server, and the checks of what it left behind: shared by
the runs of bench/run.py and the retention run of bench/storage.py."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench import loop_lag
from bench.events import RequestSet, write_requests
from bench.prefill import rows_after
from bench.procs import CpuMeter
from bench.report import check
from bench.servers import (
    STRIPE_SECRET,
    Backend,
    Server,
    server_counters,
    wait_published,
)
from bench.wrk import Load, WrkResult, run_wrk


def signed_pool(
    workdir: Path, name: str, server: Server, load: Load, per_thread: int, tag: str
) -> RequestSet:
    return write_requests(
        workdir / name,
        tag=tag,
        threads=load.threads,
        per_thread=per_thread,
        host=f"127.0.0.1:{server.port}",
        secret=STRIPE_SECRET,
        signed_at_s=int(time.time()),
    )


def measure_pass(
    server: Server,
    requests: RequestSet,
    load: Load,
    nats_pid: int | None,
    limits: list[int] | None = None,
    database: str | None = None,
) -> tuple[WrkResult, dict[str, Any]]:
    lag_before = loop_lag.read_buckets(server.base_url)
    meter = CpuMeter(server.pid, nats_pid, server.sidecar_pids, database, server.settler_pids)
    meter.start()
    result = run_wrk(server.base_url, requests, load, limits)
    summary = result.summary()
    summary["cpu"] = meter.stop()
    summary["loop_lag"] = loop_lag.over_pass(lag_before, loop_lag.read_buckets(server.base_url))
    # Server CPU time per answer: far less sensitive to other work on the machine than
    # requests/s, so the figure to compare when trying a change.
    cpu_s = summary["cpu"]["server_pct"] / 100 * result.duration_s
    summary["server_cpu_us_per_request"] = round(1e6 * cpu_s / max(result.requests, 1), 1)
    return result, summary


def describe(title: str, s: dict[str, Any]) -> None:
    cpu = s["cpu"]
    counted = (
        ""
        if s["accepted"] is None
        else (f"  accepted {s['accepted']:,}  duplicate {s['duplicate']:,}")
    )
    print(
        f"  {title:<11} {s['rps']:>9,.0f} req/s  p50 {s['latency_ms']['p50']:6.2f} ms"
        f"  p99 {s['latency_ms']['p99']:6.2f} ms  errors {s['socket_errors'] + s['timeouts']}"
        f"  non-2xx {s['non_2xx'] if s['non_2xx'] is not None else '-'}{counted}"
        f"  server CPU {s['server_cpu_us_per_request']:.0f} µs/req"
    )
    if s.get("postgres_cpu_us_per_new_row") is not None:
        print(
            f"  {'':<11} PostgreSQL CPU per new row: {s['postgres_cpu_us_per_new_row']:.0f} µs "
            f"(cluster), {s['postgres_db_cpu_us_per_new_row']:.0f} µs (this database's "
            f"backends); {s['new_rows']:,} rows"
        )
    lag = s.get("loop_lag")
    if lag is not None:
        under = "-" if lag["max_under_ms"] is None else f"{lag['max_under_ms']:g}"
        print(
            f"  {'':<11} event-loop lag p99 {lag['p99_ms']:.2f} ms, every sample under "
            f"{under} ms ({lag['samples']:,} samples)"
        )
    parts = [f"{k.removesuffix('_pct')} {v:.0f}%" for k, v in cpu.items() if k.endswith("_pct")]
    others = ", ".join(f"{comm} {v:.0f}%" for comm, v in cpu["others"]) or "none"
    print(f"  {'':<11} CPU (100% = one core): {', '.join(parts)}; others: {others}")


def drain(backend: Backend, timeout_s: float, load_ended_s: float | None = None) -> dict[str, Any]:
    """Wait for the outbox to reach the stream after a pass.

    Waiting here keeps one pass's publishing from eating into the next pass's CPU, and
    the time it takes is itself a figure: how long the stream lags a burst, counted from
    the end of the load (`load_ended_s`, a `time.monotonic()`; default: now) to the first
    look that found the outbox empty and that stayed so until at least a second after
    the load, so that requests still in flight when wrk stopped are waited for.
    """
    ended_s = time.monotonic() if load_ended_s is None else load_ended_s
    waited_s, left = wait_published(backend.dsn, timeout_s, ended_s)
    return {"outbox_drain_s": round(waited_s, 2), "unpublished_left": left}


def load_checks(new: WrkResult, dup: WrkResult) -> list[dict[str, Any]]:
    """Was the load what it claims: every new event sent once, every answer a 2xx?"""
    non_2xx = [r.non_2xx if r.non_2xx is not None else r.wrk_errors_status for r in (new, dup)]
    errors = [r.socket_errors + r.timeouts for r in (new, dup)]
    return [
        check(
            "new-events pass sent each event at most once",
            new.wraps == 0,
            f"{new.wraps} pool wrap(s); raise --pool-rate if not 0",
        ),
        check("every answer was a 2xx", sum(non_2xx) == 0, f"non-2xx new/dup: {non_2xx}"),
        check("no socket errors or timeouts", sum(errors) == 0, f"new/dup: {errors}"),
    ]


def postgres_per_row(summary: dict[str, Any], new_rows: int) -> None:
    """PostgreSQL CPU per row a pass recorded, in µs: the whole cluster (the figure issue
    14 sets a target for: background writer, WAL writer, checkpointer and autovacuum
    included) and the backends of the run's own database only (less exposed to other
    work on the server). Added to the pass's summary."""
    cpu = summary["cpu"]
    summary["new_rows"] = new_rows
    for key, pct in (
        ("postgres_cpu_us_per_new_row", cpu["postgres_cluster_pct"]),
        ("postgres_db_cpu_us_per_new_row", cpu.get("postgres_db_pct")),
    ):
        seconds = None if pct is None else pct / 100 * cpu["elapsed_s"]
        summary[key] = (
            None if seconds is None or not new_rows else round(1e6 * seconds / new_rows, 1)
        )


def row_checks(
    backend: Backend, server: Server, new: WrkResult, dup: WrkResult, after_id: int = 0
) -> list[dict[str, Any]]:
    """Does processed_webhooks hold exactly one row per accepted event?

    wrk stops with up to one request in flight per connection: the gateway may commit
    those events, but wrk never reads the answers. So wrk's own count can only bound the
    rows (accepted <= rows <= accepted + unanswered), while the gateway's counter of
    `accepted` answers, taken after everything finished, must equal the rows exactly.
    Rows up to `after_id` were there before the server started (a prefill).
    """
    rows = rows_after(backend.dsn, after_id)
    found = []
    if new.accepted is not None and dup.accepted is not None:
        accepted = new.accepted + dup.accepted
        unanswered = new.unanswered + dup.unanswered
        found.append(
            check(
                "rows within wrk's accepted answers (+ unanswered at stop)",
                accepted <= rows <= accepted + unanswered,
                f"{rows:,} rows; {accepted:,} 'accepted' answers read by wrk; "
                f"{unanswered} sent but unanswered when wrk stopped",
            )
        )
        found.append(
            check(
                "duplicates pass found nothing new",
                dup.accepted <= new.unanswered,
                f"{dup.accepted} 'accepted' in the duplicates pass; at most the "
                f"{new.unanswered} whose first answer wrk never read may be new",
            )
        )
    # Any worker's /metrics answers for all of them (merged across `--workers N`).
    outcomes = server_counters(server)["outcomes"]
    found.append(
        check(
            "rows == 'accepted' answers the gateway gave (gateway_webhooks_total)",
            rows == outcomes.get("accepted", -1),
            f"{rows:,} rows; gateway outcomes {outcomes}",
        )
    )
    return found
