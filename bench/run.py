"""`make bench`: the gateway side by side with a bare endpoint.

One after another on this machine, under the same uvicorn settings and the same wrk load
(64 connections, 2 threads, the same duration):

  (a) bench/bare_app.py: reads the body and answers 200;
  (b) the gateway with group commit (`[ingest] batching = true`, the shipped defaults);
  (c) the gateway with batching off (one commit per request);
  prefilled: (b) again, on a table prefilled with `--prefill` rows (default 10 M);
  retention: (b) on a table of `--retention-rows` expired rows (default 1 M), a pass
      without retention, then a pass while `gateway retention run` empties their
      payloads (bench/storage.py);
  (e) end_to_end: `gateway serve` and `gateway settle` together, as `make run` runs
      them: a burst of new payments, how fast they are accepted, reach the stream and
      are settled, the ledger's lag after the burst, and the webhook-to-settled latency
      under a paced load at half that capacity; checks that the ledger holds exactly
      the accepted payments (bench/e2e.py).

Each gateway gets a fresh database and a private nats-server (file storage,
`sync_interval: always`), both removed afterwards. Each server gets a pass of unique
Stripe-signed events, then a pass replaying the same events (duplicates); PostgreSQL's CPU
per row a new-events pass recorded is reported beside each server's. Then a soak of
(b) for resident memory, the settlement drain (bench/settlement.py), forwarding
(bench/forward.py) and what numbering keyed events costs PostgreSQL at ingest
(bench/ingest_numbering.py: at most +10 µs per new event over an unkeyed one). Results
go to bench/results.json (`--output`) and a table on stdout.

    .venv/bin/python -m bench.run                        # full run (make bench)
    .venv/bin/python -m bench.run --duration 10 --soak-s 30
    .venv/bin/python -m bench.run --duration 2 --soak-s 0 --quick   # self-check
    .venv/bin/python -m bench.run --tracing   # the same with traces exported (ratio 1.0)
    .venv/bin/python -m bench.run --prefill 0 --retention-rows 0   # without the storage runs
    .venv/bin/python -m bench.run --quick --prefill 20000 --retention-rows 20000

`--tracing` turns `[tracing]` on for (b), (c) and the soak at `sample_ratio = 1.0`,
exporting to a small OTLP/HTTP sink the benchmark starts itself (bench/otlp_sink.py),
unless `--set tracing.endpoint=...` names a collector; compare its figures with a run
without it, on the same machine, one after the other.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import ingest_numbering, report
from bench.e2e import end_to_end_run
from bench.events import new_tag
from bench.forward import forwarding_run
from bench.otlp_sink import running_sink
from bench.passes import (
    describe,
    drain,
    load_checks,
    measure_pass,
    postgres_per_row,
    row_checks,
    signed_pool,
)
from bench.prefill import Prefilled, prefill, rows_after, storage
from bench.procs import RssSampler, machine_busy_s, tree_rss_kib
from bench.report import check
from bench.servers import (
    ROOT,
    STRIPE_TOLERANCE_S,
    Backend,
    bare_server,
    compile_sources,
    count_rows,
    fresh_backend,
    gateway_server,
    server_counters,
    stream_count,
)
from bench.settlement import settlement_benchmark
from bench.storage import retention_run
from bench.wrk import Load, run_wrk, wrk_binary
from tests.support.nats import nats_server_binary

DEFAULT_OUTPUT = Path(__file__).with_name("results.json")
PASSES = tuple(report.PASS_TITLES)
DEFAULT_PREFILL = 10_000_000  # acceptance with 10 M rows stored
DEFAULT_RETENTION_ROWS = 1_000_000  # p99 while retention removes 1 M payloads
SOAK_CHUNK_S = 60  # pre-signed pools are regenerated per chunk: fresh timestamps, bounded files


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--duration", type=int, default=15, help="seconds per wrk pass (default 15)")
    p.add_argument(
        "--soak-s",
        type=int,
        default=300,
        help="sustained run of (b) for RSS (default 300; 0 skips)",
    )
    p.add_argument(
        "--warmup-s",
        type=int,
        default=60,
        # Steady state includes the bounded memory of recorded keys being full: at about
        # 6,000 new events/s, 60 s passes the default 200,000 keys.
        help="load before the first RSS reading (long enough to fill [ingest] remembered_keys)",
    )
    p.add_argument("--workers", type=int, default=1, help="server worker processes (default 1)")
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--threads", type=int, default=2, help="wrk threads (default 2)")
    p.add_argument(
        "--runs",
        default=",".join(report.RUN_TITLES),
        help=f"which of {','.join(report.RUN_TITLES)} to run (default: all; prefilled and "
        "retention only with --prefill / --retention-rows above 0)",
    )
    p.add_argument(
        "--prefill",
        type=int,
        metavar="N",
        help="rows stored before the run 'prefilled' ((b) again, on that table) starts: "
        "published Stripe rows with ~2 KB bodies, generated in PostgreSQL "
        f"(default {DEFAULT_PREFILL:,}; --quick 0; 0 skips the run)",
    )
    p.add_argument(
        "--prefill-span-s",
        type=float,
        default=7 * 86_400.0,
        help="prefilled rows were received over this many seconds before now (default 7 "
        "days, inside the shipped 30-day payload horizon)",
    )
    p.add_argument(
        "--retention-rows",
        type=int,
        metavar="N",
        help="expired rows stored before the run 'retention', whose payloads `gateway "
        f"retention run` empties during a pass (default {DEFAULT_RETENTION_ROWS:,}; "
        "--quick 0; 0 skips the run)",
    )
    p.add_argument(
        "--retention-age-s",
        type=float,
        default=3600.0,
        help="[retention] payload_max_age_s of the retention run (default 3600; its "
        "prefilled rows are a day older than that and more)",
    )
    p.add_argument(
        "--retention-timeout-s",
        type=float,
        default=1800.0,
        help="how long retention may go on after its pass before it is stopped (default 1800)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        dest="overrides",
        metavar="SECTION.KEY=VALUE",
        help="override a gateway setting for (b), (c) and the soak, e.g. "
        "ingest.batch_window_us=500 or outbox.batch_size=512 (batching stays per run)",
    )
    p.add_argument(
        "--pool-rate",
        type=int,
        default=50_000,
        help="events pre-signed per second of a pass; above any server's rate so that no "
        "event is sent twice in a new-events pass (default 50000)",
    )
    p.add_argument(
        "--count-answers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="count status codes and accepted/duplicate answers in wrk's response() hook",
    )
    p.add_argument(
        "--hook-probe-s",
        type=int,
        default=5,
        help="seconds per side of the response()-hook overhead probe on (a) (0 skips)",
    )
    p.add_argument(
        "--outbox",
        choices=("relay", "inline"),
        help="who publishes to JetStream: a `gateway relay` process beside `gateway serve` "
        "([outbox] inline = false; the default of (b), (c) and the soak) or serve itself "
        "(the shipped default, and the default of (e), as `make run` runs it)",
    )
    p.add_argument(
        "--relay-nice",
        type=int,
        default=10,
        help="niceness of the relay process (default 10: acceptance first, the stream "
        "catches up; 0 competes equally)",
    )
    p.add_argument(
        "--settle-events",
        type=int,
        default=50_000,
        help="backlog `gateway settle` drains (default 50000; --quick 2000; 0 skips)",
    )
    p.add_argument(
        "--numbering-rounds",
        type=int,
        default=3,
        help="rounds of bench.ingest_numbering, what numbering keyed events costs "
        "PostgreSQL at ingest (default 3, over 20000 events; --quick 1 over 2000; 0 skips)",
    )
    p.add_argument(
        "--forward-events",
        type=int,
        default=20_000,
        help="backlog `gateway forward` delivers to a local target (default 20000; "
        "--quick 500; 0 skips)",
    )
    p.add_argument(
        "--tracing",
        action="store_true",
        help="traces on in (b), (c) and the soak at sample_ratio 1.0, exported to a sink "
        "the benchmark starts (or to --set tracing.endpoint=...), to measure their cost",
    )
    p.add_argument(
        "--paced-s",
        type=float,
        default=10.0,
        help="seconds of (e)'s paced load (default 10; --quick at most 3)",
    )
    p.add_argument(
        "--paced-rate",
        type=float,
        help="events/s of (e)'s paced load (default: half of what its burst sustained end to end)",
    )
    p.add_argument(
        "--settle-timeout-s",
        type=float,
        default=600.0,
        help="how long (e) waits for the ledger to catch up after a load (default 600)",
    )
    p.add_argument("--drain-timeout-s", type=float, default=180.0)
    p.add_argument(
        "--quick", action="store_true", help="self-check: no soak, no probe, exit 1 on any fault"
    )
    p.add_argument(
        "--output",
        type=Path,
        help=f"results file (default {DEFAULT_OUTPUT}; --quick writes none unless given)",
    )
    p.add_argument("--keep-workdir", action="store_true", help="keep logs and configs")
    args = p.parse_args(argv)
    args.runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    unknown = set(args.runs) - set(report.RUN_TITLES)
    if unknown:
        p.error(f"--runs: unknown {sorted(unknown)}; choose from {sorted(report.RUN_TITLES)}")
    if args.prefill is None:
        args.prefill = 0 if args.quick else DEFAULT_PREFILL
    if args.retention_rows is None:
        args.retention_rows = 0 if args.quick else DEFAULT_RETENTION_ROWS
    if args.prefill < 0 or args.retention_rows < 0:
        p.error("--prefill and --retention-rows must be 0 or more")
    args.runs = [
        r
        for r in args.runs
        if not (r == "prefilled" and not args.prefill)
        and not (r == "retention" and not args.retention_rows)
    ]
    if args.quick:
        args.soak_s = 0
        args.hook_probe_s = 0
        args.settle_events = min(args.settle_events, 2_000)
        args.numbering_rounds = min(args.numbering_rounds, 1)
        args.forward_events = min(args.forward_events, 500)
        args.drain_timeout_s = min(args.drain_timeout_s, 30.0)
        args.paced_s = min(args.paced_s, 3.0)
        args.settle_timeout_s = min(args.settle_timeout_s, 120.0)
    if args.output is None and not args.quick:
        args.output = DEFAULT_OUTPUT
    # A duplicates pass is re-signed, so one pass (plus start-up) must fit in the window.
    if max(args.duration, args.warmup_s) + 30 > STRIPE_TOLERANCE_S:
        p.error(f"--duration and --warmup-s must stay under {STRIPE_TOLERANCE_S - 30} s")
    args.sections = {}
    for item in args.overrides:
        key, sep, value = item.partition("=")
        section, dot, name = key.strip().partition(".")
        if not sep or not dot:
            p.error(f"--set {item!r}: expected SECTION.KEY=VALUE")
        args.sections.setdefault(section, {})[name] = tomllib.loads(f"v = {value}")["v"]
    if args.tracing:
        args.sections.setdefault("tracing", {}).setdefault("sample_ratio", 1.0)
    return args


def sections_for(run: str, args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """The gateway settings of one run: the shipped defaults, `--set` overrides,
    `[ingest] batching` on for (b), (e), the prefilled and retention runs and the soak,
    off for (c), `[outbox] inline` as `--outbox` says (by default off, but on for (e) as
    shipped), and for the retention run its horizon with the serving process's own
    retention off."""
    sections = {name: dict(values) for name, values in args.sections.items()}
    sections.setdefault("ingest", {})["batching"] = run != "no_batching"
    outbox = args.outbox or ("inline" if run == "end_to_end" else "relay")
    sections.setdefault("outbox", {}).setdefault("inline", outbox == "inline")
    if run == "retention":
        # Only the separate `gateway retention run` removes, at the run's short horizon.
        retention = sections.setdefault("retention", {})
        retention["payload_max_age_s"] = args.retention_age_s
        retention["background"] = False
    return sections


def prefill_table(args: argparse.Namespace, backend: Backend) -> tuple[Prefilled, dict[str, Any]]:
    """Fill the run's fresh table with `--prefill` published rows, received over the
    `--prefill-span-s` before now (the newest a minute ago, all within the shipped payload
    horizon, so the gateway's background retention finds nothing to remove)."""
    print(f"  prefilling {args.prefill:,} rows")
    pre = prefill(backend.dsn, args.prefill, newest_age_s=60.0, span_s=args.prefill_span_s)
    size = storage(backend.dsn)
    print(
        f"  prefilled {pre.rows:,} rows in {pre.seconds:.1f} s "
        f"({pre.as_dict()['rows_per_s'] or 0:,} rows/s), VACUUM (ANALYZE) + CHECKPOINT "
        f"{pre.vacuum_s:.1f} s; table + TOAST + "
        f"indexes {size['total_bytes'] / 2**20:,.0f} MiB, {size['bytes_per_row']:,} bytes "
        "per row"
    )
    return pre, size


def measure_server(
    run: str, args: argparse.Namespace, load: Load, workdir: Path
) -> tuple[dict[str, Any], float]:
    """Both passes against one server; returns the run's record and its new-events rate."""
    print(f"== {report.RUN_TITLES[run]}")
    with contextlib.ExitStack() as stack:
        backend: Backend | None = None
        record: dict[str, Any] = {"title": report.RUN_TITLES[run]}
        after_id = 0  # rows up to this id were there before the server started
        if run == "bare":
            server = bare_server(workdir, run, args.workers)
        else:
            backend = stack.enter_context(fresh_backend())
            if run == "prefilled":
                pre, size = prefill_table(args, backend)
                record["prefill"] = pre.as_dict()
                record["storage"] = {"after_prefill": size}
                after_id = pre.max_id
            server = gateway_server(
                backend, workdir, run, sections_for(run, args), args.workers, args.relay_nice
            )
        server.start()
        stack.callback(server.stop)
        nats_pid = backend.nats.proc.pid if backend and backend.nats.proc else None
        database = backend.database if backend else None
        if backend:
            record["settings"] = sections_for(run, args)

        per_thread = math.ceil(args.pool_rate * load.duration_s / load.threads)
        tag = new_tag()
        pool = signed_pool(workdir, f"{run}-new", server, load, per_thread, tag)
        new, record["new"] = measure_pass(server, pool, load, nats_pid, database=database)
        new_ended_s = time.monotonic()
        pool.remove()
        if not backend:  # the bare endpoint answers neither "accepted" nor "duplicate"
            record["new"]["accepted"] = record["new"]["duplicate"] = None
        else:
            postgres_per_row(record["new"], rows_after(backend.dsn, after_id))
        describe("new events", record["new"])
        if backend:
            record["after_new"] = drain(backend, args.drain_timeout_s, new_ended_s)
            drained_s = record["after_new"]["outbox_drain_s"]
            print(f"  {'':<11} outbox drained {drained_s} s after the pass")

        # Replay exactly what each thread sent, re-signed now (as a provider's retry is).
        limits = [max(1, min(n, per_thread)) for n in new.built_per_thread]
        pool = signed_pool(workdir, f"{run}-dup", server, load, max(limits), tag)
        dup, record["duplicates"] = measure_pass(
            server, pool, load, nats_pid, limits, database=database
        )
        dup_ended_s = time.monotonic()
        pool.remove()
        if not backend:
            record["duplicates"]["accepted"] = record["duplicates"]["duplicate"] = None
        describe("duplicates", record["duplicates"])

        record["checks"] = load_checks(new, dup)
        if backend:
            record["after_duplicates"] = drain(backend, args.drain_timeout_s, dup_ended_s)
            record["checks"] += row_checks(backend, server, new, dup, after_id)
            rows, messages = rows_after(backend.dsn, after_id), stream_count(backend.nats.url)
            record["checks"].append(
                check(
                    "the stream holds one message per new row, once the outbox drained",
                    rows == messages,
                    f"{rows:,} rows"
                    + (" above the prefill" if after_id else "")
                    + f", {messages:,} messages",
                )
            )
            if sections_for(run, args)["outbox"]["inline"]:
                # A relay figure well above zero while NATS was up means rows were
                # published twice: the sweep took rows the inline publisher still held.
                record["published"] = server_counters(server)["published"]
            if run == "prefilled":
                record["storage"]["after_passes"] = size = storage(backend.dsn)
                print(
                    f"  after the passes: {size['total_bytes'] / 2**20:,.0f} MiB for "
                    f"{size['rows']:,} rows, {size['bytes_per_row']:,} bytes per row"
                )
        record["rss_mib_at_end"] = round(tree_rss_kib(server.pid) / 1024, 1)
        for c in record["checks"]:
            print(f"  [{'ok' if c['ok'] else 'FAIL'}] {c['check']}: {c['detail']}")
    return record, new.rps


# --- extra measurements --------------------------------------------------------------


def hook_probe(args: argparse.Namespace, load: Load, workdir: Path) -> dict[str, Any]:
    """How much wrk's response() hook costs, on (a) where it shows most.

    Answers are counted in Lua for the row check; if that slowed wrk enough to cap the
    bare endpoint, (b)/(a) would look better than it is.
    """
    print("== response() hook overhead, on (a)")
    server = bare_server(workdir, "probe", args.workers)
    server.start()
    out: dict[str, Any] = {"seconds_per_side": args.hook_probe_s}
    try:
        for counting in (True, False):
            probe = Load(load.connections, load.threads, args.hook_probe_s, counting)
            per_thread = math.ceil(args.pool_rate * probe.duration_s / probe.threads)
            pool = signed_pool(workdir, "probe", server, probe, per_thread, new_tag())
            result = run_wrk(server.base_url, pool, probe)
            pool.remove()
            out["with_hook_rps" if counting else "without_hook_rps"] = round(result.rps, 1)
    finally:
        server.stop()
    out["hook_cost_pct"] = round(100 * (1 - out["with_hook_rps"] / out["without_hook_rps"]), 1)
    print(
        f"  with response(): {out['with_hook_rps']:,.0f} req/s, without: "
        f"{out['without_hook_rps']:,.0f} req/s (the hook costs {out['hook_cost_pct']:+.1f} %)"
    )
    return out


def soak(args: argparse.Namespace, load: Load, workdir: Path, rate_hint: float) -> dict[str, Any]:
    """RSS of (b) after a warm-up and after `--soak-s` seconds more at full load.

    RSS is read at the same two moments after the warm-up and after the soak: as soon as
    the load stops (what a dashboard shows during a burst, publish backlog included) and
    again once the outbox has drained. The target compares the first pair.

    The soak runs in chunks of at most a minute, each with a freshly signed pool of new
    events: one pool for five minutes would be gigabytes and its timestamps would leave
    Stripe's 300 s window. Signing a chunk pauses the load for a few seconds (reported).
    """
    print(f"== soak: (b) for {args.soak_s} s after a {args.warmup_s} s warm-up")
    settings = sections_for("batching", args)
    out: dict[str, Any] = {"settings": settings}
    with fresh_backend() as backend:
        server = gateway_server(backend, workdir, "soak", settings, args.workers, args.relay_nice)
        server.start()
        nats_pid = backend.nats.proc.pid if backend.nats.proc else None

        def one_pass(seconds: int, events_per_s: float) -> dict[str, Any]:
            shape = Load(load.connections, load.threads, seconds, load.count_answers)
            per_thread = math.ceil(events_per_s * seconds / shape.threads)
            pool = signed_pool(workdir, "soak", server, shape, per_thread, new_tag())
            _, summary = measure_pass(server, pool, shape, nats_pid)
            pool.remove()
            return summary

        def rss_mib() -> float:
            return round(tree_rss_kib(server.pid) / 1024, 1)

        try:
            # 1.5x the rate (b) reached, so a pass rarely runs out of new events.
            chunk_rate = max(1.5 * rate_hint, 8_000)
            out["warmup"] = one_pass(args.warmup_s, chunk_rate)
            out["rss_mib_after_warmup"] = rss_mib()
            out["after_warmup"] = drain(backend, args.drain_timeout_s)
            out["rss_mib_after_warmup_drained"] = rss_mib()
            print(
                f"  RSS after warm-up: {out['rss_mib_after_warmup']} MiB, "
                f"{out['rss_mib_after_warmup_drained']} MiB once the outbox drained"
            )
            chunks: list[dict[str, Any]] = []
            started, elapsed_s = time.monotonic(), 0
            with RssSampler(server.pid, interval_s=2.0) as sampler:
                while elapsed_s < args.soak_s:
                    seconds = min(SOAK_CHUNK_S, args.soak_s - elapsed_s)
                    chunks.append(one_pass(seconds, chunk_rate))
                    elapsed_s += seconds
                    print(
                        f"  soak {elapsed_s:>4} s: {chunks[-1]['rps']:,.0f} req/s, p99 "
                        f"{chunks[-1]['latency_ms']['p99']:.1f} ms, RSS {rss_mib()} MiB"
                    )
            out["rss_mib_after_soak"] = rss_mib()
            out["load_pauses_s"] = round(time.monotonic() - started - args.soak_s, 1)
            out["after_soak"] = drain(backend, args.drain_timeout_s)
            out["rss_mib_after_soak_drained"] = rss_mib()
            out["rss_mib_samples_every_2s"] = [round(k / 1024, 1) for k in sampler.samples_kib]
            out["chunks"] = chunks
            rows, counters = count_rows(backend.dsn), server_counters(server)
            out["published"] = counters["published"]
            out["checks"] = [
                check(
                    "rows == 'accepted' answers the gateway gave",
                    rows == counters["outcomes"].get("accepted", -1),
                    f"{rows:,} rows; gateway outcomes {counters['outcomes']}",
                )
            ]
        finally:
            server.stop()

    def growth(before: float, after: float) -> float:
        return round(100 * (after - before) / before, 1)

    out["growth_pct"] = growth(out["rss_mib_after_warmup"], out["rss_mib_after_soak"])
    out["growth_drained_pct"] = growth(
        out["rss_mib_after_warmup_drained"], out["rss_mib_after_soak_drained"]
    )
    print(
        f"  RSS after the soak: {out['rss_mib_after_soak']} MiB ({out['growth_pct']:+.1f} %), "
        f"{out['rss_mib_after_soak_drained']} MiB once drained "
        f"({out['growth_drained_pct']:+.1f} %), peak "
        f"{max(out['rss_mib_samples_every_2s'], default=0)} MiB"
    )
    return out


# --- the run as a whole --------------------------------------------------------------


def numbering_run(args: argparse.Namespace) -> dict[str, Any]:
    """bench.ingest_numbering: PostgreSQL CPU per new event, unkeyed and keyed."""
    events = 2_000 if args.quick else 20_000
    figures = asyncio.run(ingest_numbering.measure(args.numbering_rounds, events))
    print(f"ingest numbering, {events:,} events, {args.numbering_rounds} rounds:")
    for name, us in figures.items():
        print(f"  {name:<44} {us:6.1f} µs PostgreSQL CPU per new event")
    return {
        "events": events,
        "rounds": args.numbering_rounds,
        "us_per_event": figures,
        "most_over_unkeyed_us": round(ingest_numbering.most_over_unkeyed(figures), 1),
    }


def _version(argv: list[str]) -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
        return (done.stdout or done.stderr).strip().splitlines()[0]
    return "unknown"


def _git_state() -> dict[str, Any]:
    """The commit measured, and which files under gateway/ differ from it (other work in
    progress in this checkout is measured too)."""
    head = _version(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "gateway", "sql"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        return {"head": head, "changed": [line[3:] for line in done.stdout.splitlines()]}
    return {"head": head, "changed": None}


def environment(args: argparse.Namespace) -> dict[str, Any]:
    # Anything else busy on a small VM (a test suite, a build) lowers every figure:
    # record how busy the machine was just before the run.
    busy0, t0 = machine_busy_s(), time.monotonic()
    time.sleep(2.0)
    idle_busy_pct = 100 * (machine_busy_s() - busy0) / (time.monotonic() - t0)
    packages = ("uvicorn", "starlette", "uvloop", "httptools", "asyncpg", "nats-py", "orjson")
    return {
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "packages": {p: importlib.metadata.version(p) for p in packages},
        "wrk": _version([wrk_binary(), "-v"]),
        "nats_server": _version([nats_server_binary(), "--version"]),
        "git": _git_state(),
        "load_average_before": os.getloadavg(),
        "busy_before_pct": round(idle_busy_pct, 1),
        "workers": args.workers,
    }


def _tracing(args: argparse.Namespace, stack: contextlib.ExitStack) -> Any:
    """With `--tracing` and no `tracing.endpoint` given: the benchmark's own sink, whose
    address becomes the gateway's `[tracing] endpoint` (serve and relay both export)."""
    if not args.tracing:
        return None
    section = args.sections["tracing"]
    sink = None
    if "endpoint" not in section:
        sink = stack.enter_context(running_sink())
        section["endpoint"] = sink.endpoint
    print(f"tracing on: exporting to {section['endpoint']} at ratio {section['sample_ratio']}")
    return sink


def tracing_line(
    tracing: dict[str, Any], runs: dict[str, Any], memory: dict[str, Any] | None
) -> str:
    """What the sink received, per request the gateways answered (soak included)."""
    sink = tracing.get("sink")
    if sink is None:
        return f"tracing on, exported to {tracing['endpoint']} (not counted here)"
    passes = [r[p] for name, r in runs.items() if name != "bare" for p in PASSES if p in r]
    if memory is not None:
        passes += [memory["warmup"], *memory["chunks"]]
    answered = sum(p["requests"] for p in passes)
    per_request = sink["bytes"] / answered if answered else 0.0
    return (
        f"tracing on at ratio {tracing['sample_ratio']}: the sink took {sink['requests']:,} "
        f"exports, {sink['bytes'] / 2**20:.1f} MiB ({per_request:,.0f} bytes per request "
        "answered); compare server CPU µs/req with a run without --tracing"
    )


def command_line(argv: Sequence[str] | None) -> str:
    given = list(sys.argv[1:] if argv is None else argv)
    return " ".join([".venv/bin/python -m bench.run", *given]) if given else "make bench"


# Past the complexity bar on purpose: one branch per bench pass the command line may ask for.
def main(argv: Sequence[str] | None = None) -> int:  # noqa: C901
    args = parse_args(argv)
    # SIGTERM (a CI timeout, `kill`) becomes SystemExit, so the `finally` blocks still stop
    # the servers and NATS and drop the databases instead of leaving them behind.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    load = Load(args.connections, args.threads, args.duration, args.count_answers)
    compile_sources()
    workdir = Path(tempfile.mkdtemp(prefix="gw-bench-"))
    results: dict[str, Any] = {
        "command": command_line(argv),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "load": {
            "connections": load.connections,
            "threads": load.threads,
            "duration_s": load.duration_s,
            "wrk_timeout": "5s",
            "answers_counted_in_wrk": load.count_answers,
        },
    }
    stack = contextlib.ExitStack()
    try:
        sink = _tracing(args, stack)
        if args.tracing:
            results["tracing"] = dict(args.sections["tracing"])
        results["environment"] = environment(args)
        if results["environment"]["busy_before_pct"] > 20:
            print(
                f"warning: the machine was {results['environment']['busy_before_pct']} % busy "
                "before the run (other work?); figures will be low and noisy"
            )
        runs: dict[str, Any] = {}
        rate_b = 10_000.0
        for run in report.RUN_TITLES:
            if run not in args.runs:
                continue
            if run == "retention":
                runs[run] = retention_run(args, load, workdir, sections_for(run, args))
                continue
            if run == "end_to_end":
                bare = runs.get("bare", {}).get("new", {}).get("rps")
                runs[run] = end_to_end_run(args, load, workdir, sections_for(run, args), bare)
                continue
            runs[run], rps = measure_server(run, args, load, workdir)
            rate_b = rps if run == "batching" else rate_b
        results["runs"] = runs
        if args.hook_probe_s > 0:
            results["response_hook_probe"] = hook_probe(args, load, workdir)
        memory = soak(args, load, workdir, rate_b) if args.soak_s > 0 else None
        results["memory"] = memory
        results["settlement"] = (
            settlement_benchmark(args.settle_events) if args.settle_events > 0 else None
        )
        results["forwarding"] = (
            forwarding_run(args.forward_events) if args.forward_events > 0 else None
        )
        results["numbering"] = numbering_run(args) if args.numbering_rounds > 0 else None
        ratio = report.ratios(runs)
        results["ratios"] = ratio
        targets = report.targets(runs, ratio, memory, results["settlement"], results["numbering"])
        results["targets"] = [t.as_dict() for t in targets]
        if sink is not None:
            results["tracing"]["sink"] = sink.counts.as_dict()
    finally:
        stack.close()
        if args.keep_workdir:
            print(f"logs and configs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    print()
    print(f"command: {results['command']}")
    print(report.table(runs))
    print()
    print(report.ratio_lines(ratio))
    end_to_end = report.end_to_end_lines(runs)
    if end_to_end:
        print()
        print(end_to_end)
    storage_lines = report.storage_lines(runs)
    if storage_lines:
        print()
        print(storage_lines)
    if results["forwarding"]:
        f = results["forwarding"]
        print()
        print(
            f"forwarding {f['events']:,} events to a local target: {f['forwarded_per_s']:,.0f}/s, "
            f"{f['ratio_to_baseline']:.2f} of the HTTP adapter alone "
            f"({f['baseline_posts_per_s']:,.0f}/s), {f['forwarder_cpu_us_per_event']} µs "
            f"CPU/event; checks {'ok' if f['checks_ok'] else 'FAILED'}"
        )
    print()
    print(report.target_table(targets))
    if args.tracing:
        print()
        print(tracing_line(results["tracing"], runs, memory))
    if args.output:
        args.output.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        shown = args.output.relative_to(ROOT) if args.output.is_relative_to(ROOT) else args.output
        print(f"\nresults written to {shown}")

    checks = [c for r in runs.values() for c in r["checks"]]
    checks += memory["checks"] if memory else []
    if results["forwarding"]:
        ok = results["forwarding"]["checks_ok"]
        checks.append({"check": "forwarding: each event delivered once (rows)", "ok": ok})
    failed = [c for c in checks if not c["ok"]]
    if args.quick:
        # The self-check: every server answered, the answers were right, rows match.
        answered = all(r["new"]["requests"] > 0 for r in runs.values())
        if failed or not answered:
            print(f"\nself-check FAILED: {[c['check'] for c in failed] or 'no answers'}")
            return 1
        print("\nself-check passed")
        return 0
    # Targets are reported, never asserted; a broken row check is a correctness fault.
    row_faults = [c for c in failed if "rows" in c["check"]]
    return 1 if row_faults else 0


if __name__ == "__main__":
    sys.exit(main())
