"""The retention run of `make bench`: acceptance while `gateway retention run`
empties expired payloads, and what the table costs on disk before and after.

One fresh database is prefilled with `--retention-rows` published Stripe rows received
days ago, older than the run's `[retention] payload_max_age_s` (`--retention-age-s`,
3600 s by default), and a gateway with group commit (b) is started with its own
background retention off, so only the separate process removes. Then:

  1. a new-events pass without retention (the baseline, same server, same table);
  2. `gateway retention run` starts as its own process; once its first batch committed,
     a second new-events pass runs while it works (shipped `batch_size` and `pause_s`);
  3. retention is left to finish (up to `--retention-timeout-s`), the table is vacuumed
     (plain VACUUM: the space is reused by later rows, not returned to the OS); then the
     rows the passes recorded are deleted and VACUUM FULL rewrites the table, returning
     the space: what an emptied event costs on its own. Sizes after each step.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.events import RequestSet, new_tag
from bench.passes import describe, drain, measure_pass, postgres_per_row, signed_pool
from bench.prefill import (
    database_now,
    delete_after,
    payloads_removed_between,
    prefill,
    retention_watermark,
    rows_after,
    storage,
    vacuum,
)
from bench.procs import cpu_s, tree_rss_kib
from bench.report import RUN_TITLES, check
from bench.servers import ROOT, fresh_backend, gateway_server, server_counters, stream_count
from bench.wrk import Load, WrkResult
from tests.support import processes

RETENTION_START_TIMEOUT_S = 60.0  # for its first batch to commit (start-up included)


def _wait_first_batch(dsn: str, proc: subprocess.Popen[bytes]) -> float | None:
    """Seconds until retention's watermark moved (its first batch committed), or None if
    it exited or did not get there in time."""
    started = time.monotonic()
    while time.monotonic() - started < RETENTION_START_TIMEOUT_S:
        if retention_watermark(dsn) > 0:
            return round(time.monotonic() - started, 1)
        if proc.poll() is not None:
            return None
        time.sleep(0.05)
    return None


def _finish(proc: subprocess.Popen[bytes], timeout_s: float) -> tuple[bool, float]:
    """Wait for retention to end on its own; stop it after `timeout_s`. (finished, waited)."""
    started = time.monotonic()
    try:
        proc.wait(timeout=timeout_s)
        return True, round(time.monotonic() - started, 1)
    except subprocess.TimeoutExpired:
        processes.stop(proc, 30)
        return False, round(time.monotonic() - started, 1)


def _coverage_note(out: dict[str, Any]) -> str | None:
    """Did retention run during the whole pass? A figure taken otherwise says so."""
    if out["first_batch_after_s"] is None:
        return "retention never started its first batch: the pass ran without it"
    if not out["running_when_pass_ended"]:
        return (
            "retention finished before the pass ended: only part of the pass ran beside it "
            "(raise --retention-rows)"
        )
    return None


def _checks(
    dsn: str,
    nats_url: str,
    server_outcomes: dict[str, int],
    after_id: int,
    passes: list[WrkResult],
    retention: dict[str, Any],
    prefilled_rows: int,
) -> list[dict[str, Any]]:
    rows, messages = rows_after(dsn, after_id), stream_count(nats_url)
    non_2xx = [r.non_2xx if r.non_2xx is not None else r.wrk_errors_status for r in passes]
    errors = [r.socket_errors + r.timeouts for r in passes]
    found = [
        check(
            "new-events passes sent each event at most once",
            all(r.wraps == 0 for r in passes),
            f"pool wraps {[r.wraps for r in passes]}; raise --pool-rate if not 0",
        ),
        check("every answer was a 2xx", sum(non_2xx) == 0, f"non-2xx: {non_2xx}"),
        check("no socket errors or timeouts", sum(errors) == 0, f"{errors}"),
        check(
            "new rows == 'accepted' answers the gateway gave (gateway_webhooks_total)",
            rows == server_outcomes.get("accepted", -1),
            f"{rows:,} rows above the prefill; gateway outcomes {server_outcomes}",
        ),
        # The prefilled rows are published already: a relay that took them would show
        # here as more messages than new rows.
        check(
            "the stream holds one message per new row (none for the prefilled rows)",
            rows == messages,
            f"{rows:,} new rows, {messages:,} messages",
        ),
    ]
    if retention["finished"]:
        emptied = retention["report"]["removed"]["processed_webhooks"]["payload"]
        found.append(
            check(
                "retention emptied exactly the prefilled (expired) payloads",
                emptied == prefilled_rows,
                f"{emptied:,} emptied, {prefilled_rows:,} prefilled",
            )
        )
    return found


def retention_run(
    args: argparse.Namespace, load: Load, workdir: Path, settings: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The retention run's record (see the module's docstring)."""
    print(f"== {RUN_TITLES['retention']}: {args.retention_rows:,} expired payloads")
    age_s = float(settings["retention"]["payload_max_age_s"])
    record: dict[str, Any] = {"title": RUN_TITLES["retention"], "settings": settings}
    with fresh_backend() as backend, contextlib.ExitStack() as stack:
        dsn = backend.dsn
        # A day past the horizon: no row turns eligible or stops being so during the run.
        pre = prefill(
            dsn,
            args.retention_rows,
            newest_age_s=age_s + 86_400,
            span_s=args.prefill_span_s,
            seed=f"retention-{new_tag()}",
        )
        record["prefill"] = pre.as_dict()
        record["storage"] = {"after_prefill": storage(dsn, count_removed=True)}
        print(
            f"  prefilled {pre.rows:,} expired rows in {pre.seconds:.1f} s; "
            f"{record['storage']['after_prefill']['bytes_per_row']:,} bytes per row"
        )
        server = gateway_server(
            backend, workdir, "retention", settings, args.workers, args.relay_nice
        )
        server.start()
        stack.callback(server.stop)
        nats_pid = backend.nats.proc.pid if backend.nats.proc else None
        per_thread = math.ceil(args.pool_rate * load.duration_s / load.threads)

        def new_pass(name: str, title: str, pool: RequestSet) -> WrkResult:
            before = rows_after(dsn, pre.max_id)
            result, record[name] = measure_pass(
                server, pool, load, nats_pid, database=backend.database
            )
            pool.remove()
            postgres_per_row(record[name], rows_after(dsn, pre.max_id) - before)
            describe(title, record[name])
            return result

        def pool(name: str) -> RequestSet:
            return signed_pool(workdir, f"retention-{name}", server, load, per_thread, new_tag())

        # 1. The baseline: the same server and table, nothing removing.
        baseline = new_pass("new", "new events", pool("new"))
        record["after_new"] = drain(backend, args.drain_timeout_s)

        # 2. The same load while a separate `gateway retention run` empties payloads. The
        # requests are signed first, so the window counted below is the load's alone.
        requests = pool("during")
        config = workdir / "retention.toml"
        argv = [sys.executable, "-m", "gateway", "retention", "run", "--config", str(config)]
        out_path = workdir / "retention-run.json"
        with out_path.open("wb") as out, (workdir / "retention-run.log").open("ab") as log:
            proc = subprocess.Popen([*argv, "--json"], cwd=ROOT, stdout=out, stderr=log)
        stack.callback(lambda: proc.poll() is None and _finish(proc, 0))
        ret: dict[str, Any] = {"argv": " ".join(["gateway", *argv[3:]])}
        ret["first_batch_after_s"] = _wait_first_batch(dsn, proc)
        t0, cpu0 = database_now(dsn), cpu_s(proc.pid)
        ret["running_when_pass_started"] = proc.poll() is None
        during = new_pass("during_retention", "retention", requests)
        t1 = database_now(dsn)
        ret["running_when_pass_ended"] = proc.poll() is None
        ret["cpu_pct_during_pass"] = round(
            100 * (cpu_s(proc.pid) - cpu0) / record["during_retention"]["cpu"]["elapsed_s"], 1
        )
        ret["pass_s"] = round((t1 - t0).total_seconds(), 1)
        ret["emptied_during_pass"] = payloads_removed_between(dsn, t0, t1)
        ret["rows_per_s_during_pass"] = round(ret["emptied_during_pass"] / ret["pass_s"])
        ret["finished"], ret["waited_after_pass_s"] = _finish(proc, args.retention_timeout_s)
        ret["exit_code"] = proc.returncode
        with contextlib.suppress(ValueError):
            ret["report"] = json.loads(out_path.read_text() or "null")
        ret["finished"] = ret["finished"] and proc.returncode == 0 and bool(ret.get("report"))
        if ret["finished"]:
            report = ret["report"]
            emptied = report["removed"]["processed_webhooks"]["payload"]
            ret["emptied_total"] = emptied
            ret["rows_per_s_overall"] = round(emptied / max(report["duration_s"], 1e-9))
        ret["note"] = _coverage_note(ret)
        record["retention"] = ret
        record["after_during_retention"] = drain(backend, args.drain_timeout_s)
        record["checks"] = _checks(
            dsn,
            backend.nats.url,
            server_counters(server)["outcomes"],
            pre.max_id,
            [baseline, during],
            ret,
            pre.rows,
        )
        record["rss_mib_at_end"] = round(tree_rss_kib(server.pid) / 1024, 1)
        server.stop()

        # 3. What the table costs once retention emptied the payloads.
        after = record["storage"]
        after["after_retention"] = storage(dsn, count_removed=True)
        after["vacuum_s"] = vacuum(dsn)
        after["after_retention_vacuum"] = storage(dsn, count_removed=True)
        # The rows the passes recorded (small bench bodies, kept) would blur the per-row
        # figure of an emptied event: they go before VACUUM FULL rewrites the table.
        after["rows_of_the_passes_deleted"] = delete_after(dsn, pre.max_id)
        after["vacuum_full_s"] = vacuum(dsn, full=True)
        after["after_vacuum_full"] = storage(dsn, count_removed=True)

    print(
        f"  retention: emptied {ret['emptied_during_pass']:,} payloads during the "
        f"{ret['pass_s']} s pass ({ret['rows_per_s_during_pass']:,} rows/s, the retention "
        f"process {ret['cpu_pct_during_pass']:.0f} % of a core), "
        + (
            f"{ret['emptied_total']:,} in all at {ret['rows_per_s_overall']:,} rows/s"
            if ret["finished"]
            else f"did not finish within {args.retention_timeout_s:g} s of the pass's end"
        )
    )
    if ret["note"]:
        print(f"  note: {ret['note']}")
    p99 = (record["new"]["latency_ms"]["p99"], record["during_retention"]["latency_ms"]["p99"])
    print(f"  p99 without / with retention: {p99[0]:.2f} / {p99[1]:.2f} ms")
    for key in ("after_prefill", "after_retention_vacuum", "after_vacuum_full"):
        if key == "after_vacuum_full":
            print(f"  (the {after['rows_of_the_passes_deleted']:,} rows of the passes deleted)")
        s = after[key]
        print(
            f"  {key.replace('_', ' ')}: {s['total_bytes'] / 2**20:,.0f} MiB for "
            f"{s['rows']:,} rows ({s['bytes_per_row']:,} bytes per row, "
            f"{s['payloads_removed']:,} payloads emptied)"
        )
    for c in record["checks"]:
        print(f"  [{'ok' if c['ok'] else 'FAIL'}] {c['check']}: {c['detail']}")
    return record
