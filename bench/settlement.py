"""Settlement throughput: how fast `gateway settle` drains a backlog of payment
events into the ledger, PostgreSQL (the default) or TigerBeetle (figures:
docs/performance.md).

One run: a fresh database and private nats-server (`bench.servers.fresh_backend`),
the merchants' accounts opened, `gateway currency-stub` running and a fresh Redis key
prefix for the rate cache (so the first conversions ask the stub, as after a deploy),
and the whole backlog recorded and published before the worker starts (see
`bench.settlement_backlog`). Then `gateway settle` starts as a process with its own
config file, `[ledger]` included, and the clock runs from its start until its consumer
has acknowledged the whole backlog and has nothing pending (a message is acknowledged
only after its transfer is committed, so the ledger then holds them all). Start-up
(imports, connections, consumer creation) is inside the figure; the drain rate after
the first acknowledgement is reported too.

Checks, the ledger read through the gateway's `Ledger` port so they hold on either
backend: exactly one transfer per event (each event's transfer looked up by id, with its
accounts and amount), the ledger balanced (`Ledger.check`), and the merchants' total equal
to the sum of the converted captures minus refunds computed here independently (nothing
settled twice); and in the gateway's own tables, every settlement `settled` and no dead
letters.

`--ledger tigerbeetle` settles into the cluster `TIGERBEETLE_ADDRESS` names
(`TIGERBEETLE_CLUSTER_ID`, default 0); the server cannot be installed everywhere, so
without an address, or when the cluster does not answer within 5 s, the run stops at
once with that reason (exit status 2), as the contract tests skip. The cluster outlives
the run, so the run's ids carry a tag of their own (see `bench.settlement_ledger`).

    .venv/bin/python -m bench.settlement [--events N] [--ledger postgres|tigerbeetle]
        [--batch-size N] [--ordering on|off|both] [--keys N] [--pairs N]

With `[ordering]` on (the default, as shipped) the events are spread over `--keys` keys
(1,000) and settled in each key's order; `--ordering both` drains the same backlog with
ordering off and then on, and reports the ratio of the two rates (target: at least 0.8);
`--pairs N` runs N such pairs in turn and judges their median ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import nats

from bench.procs import all_cpu_s, machine_busy_s
from bench.servers import (
    ROOT,
    Backend,
    compile_sources,
    currency_stub,
    drop_cache,
    fresh_backend,
    write_gateway_config,
)
from bench.settlement_backlog import (
    ORDER_KEY_POINTER,
    load_backlog,
    plan_payments,
)
from bench.settlement_ledger import (
    LEDGER_NAMES,
    LEDGERS,
    LedgerNotHere,
    ledger_section,
    require_tigerbeetle,
)
from bench.settlement_report import (
    ORDERING_TARGET_RATIO,
    TARGET_EVENTS_PER_S,
    ordering_table,
    table,
    verify,
)
from gateway import settings as settings_mod
from tests.support import processes
from tests.support.services import REDIS_URL, free_port

BACKLOG_EVENTS = 50_000
#: Ordering keys the backlog's events are spread over (`--keys`).
ORDER_KEYS = 1_000
GATEWAY = [sys.executable, "-m", "gateway"]


def _pg_cpu_s(database: str, cpu: dict[int, tuple[str, float]]) -> tuple[float, float]:
    """(CPU of the backends serving `database`, CPU of every postgres process)."""
    ours = everything = 0.0
    for pid, (comm, seconds) in cpu.items():
        if comm != "postgres":
            continue
        everything += seconds
        with contextlib.suppress(OSError):
            # A backend's title is "postgres: user database host state".
            if f" {database} " in Path(f"/proc/{pid}/cmdline").read_bytes().decode(
                errors="replace"
            ):
                ours += seconds
    return ours, everything


async def _wait_drained(
    backend: Backend, settings: settings_mod.Settings, events: int, timeout_s: float
) -> tuple[float | None, float]:
    """Wait until the consumer has acknowledged the whole backlog; return (seconds to the
    first acknowledgement, seconds to the last).

    The worker acknowledges a message only after its transfer is committed, so the ledger
    then holds every transfer (the checks count them afterwards). Asking JetStream, not
    PostgreSQL, keeps the measurement from adding load to the database measured.
    """
    started = time.monotonic()
    first: float | None = None
    stream, consumer = settings.nats.stream, settings.settlement.consumer
    nc = await nats.connect(backend.nats.url)
    try:
        js = nc.jetstream()
        while True:
            now = time.monotonic() - started
            try:
                info = await js.consumer_info(stream, consumer)
            except nats.errors.Error:
                info = None  # not created yet
            acked = info.ack_floor.stream_seq if info and info.ack_floor else 0
            if first is None and acked:
                first = now
            if info and acked >= events and not info.num_pending and not info.num_ack_pending:
                return first, now
            if now > timeout_s:
                raise TimeoutError(f"{acked} of {events} acknowledged after {timeout_s} s")
            await asyncio.sleep(0.02)
    finally:
        await nc.close()


def settlement_benchmark(
    events: int = BACKLOG_EVENTS,
    *,
    refund_share: float = 0.02,
    timeout_s: float = 900.0,
    profile: Path | None = None,
    ledger: str = "postgres",
    batch_size: int | None = None,
    ordering: bool = True,
    keys: int = ORDER_KEYS,
) -> dict[str, Any]:
    """Drain `events` payment events with `gateway settle` into `ledger`, with
    `[ordering]` on (the events spread over `keys` keys) or off; the figures and checks.
    `LedgerNotHere` before anything starts when TigerBeetle is not there."""
    if ledger not in LEDGERS:
        raise ValueError(f"ledger must be one of {', '.join(LEDGERS)}, got {ledger!r}")
    target = require_tigerbeetle() if ledger == "tigerbeetle" else None
    compile_sources()
    print(
        f"== settlement: drain {events:,} payment events with gateway settle "
        f"({LEDGER_NAMES[ledger]} ledger, ordering "
        f"{f'on over {keys:,} keys' if ordering else 'off'})"
    )
    # A TigerBeetle cluster keeps earlier runs' transfers: this run's ids are its own.
    run_tag = f"{uuid.uuid4().hex[:8]}_" if ledger == "tigerbeetle" else ""
    payments = plan_payments(events, refund_share, run_tag=run_tag)
    workdir = Path(tempfile.mkdtemp(prefix="gw-bench-settle-"))
    cache_prefix = f"fx-bench-{uuid.uuid4().hex[:8]}"
    out: dict[str, Any] = {
        "ledger": ledger,
        "events": events,
        "refunds": sum(p.kind == "refund" for p in payments),
        "ordering": ordering,
        "keys": keys if ordering else 0,
        "target_events_per_s": TARGET_EVENTS_PER_S,
    }
    try:
        with fresh_backend() as backend:
            stub = currency_stub(workdir, "stub")
            stub.start()
            try:
                sections: dict[str, dict[str, Any]] = {
                    "redis": {"url": REDIS_URL},
                    "currency": {"url": stub.base_url, "cache_key_prefix": cache_prefix},
                    "settlement": {"metrics_port": 0}
                    | ({} if batch_size is None else {"batch_size": batch_size}),
                    "ledger": ledger_section(ledger, target),
                    "ordering": {"enabled": ordering},
                    # The same bodies either way; only with ordering on is the key read.
                    "providers": {"stripe": {"order_key": [ORDER_KEY_POINTER]}},
                }
                config = workdir / "settle.toml"
                write_gateway_config(config, backend, free_port(), sections)
                settings = settings_mod.load(str(config))
                out["batch_size"] = settings.settlement.batch_size
                started = time.monotonic()
                asyncio.run(load_backlog(settings, payments, keys))
                # The backlog's dirty pages written out now, not by a checkpoint that
                # would land in the middle of this drain or the next run's.
                asyncio.run(_checkpoint(backend.dsn))
                out["backlog_load_s"] = round(time.monotonic() - started, 1)
                print(f"  backlog recorded and published in {out['backlog_load_s']} s")
                out.update(_drain(backend, settings, config, workdir, events, timeout_s, profile))
                out["checks"] = verify(backend, settings, payments)
            finally:
                stub.stop()
    finally:
        drop_cache(cache_prefix)
        shutil.rmtree(workdir, ignore_errors=True)
    out["passed"] = (
        all(c["ok"] for c in out["checks"]) and out["events_per_s"] >= TARGET_EVENTS_PER_S
    )
    print(table(out))
    return out


def ordering_comparison(events: int, pairs: int = 1, **kwargs: Any) -> dict[str, Any]:
    """The same backlog drained with ordering off and on, `pairs` times (every other
    pair on first): each pair's figures and ratio of drain rates, judged by the median
    ratio. The host's speed drifts between runs a minute apart (off alone has varied
    5,600-9,600 events/s within an hour), so one pair can land on either side of the
    target by chance."""
    runs: list[tuple[dict[str, Any], dict[str, Any], float]] = []
    for n in range(pairs):
        if n % 2:  # every other pair on first, so neither side always runs second
            on = settlement_benchmark(events, ordering=True, **kwargs)
            off = settlement_benchmark(events, ordering=False, **kwargs)
        else:
            off = settlement_benchmark(events, ordering=False, **kwargs)
            on = settlement_benchmark(events, ordering=True, **kwargs)
        ratio = on["events_per_s"] / off["events_per_s"] if off["events_per_s"] else 0.0
        runs.append((off, on, round(ratio, 3)))
    ratio = statistics.median(r for _, _, r in runs)
    off, on, _ = min(runs, key=lambda run: abs(run[2] - ratio))  # the pair nearest it
    out: dict[str, Any] = {
        "off": off,
        "on": on,
        "pairs": [r for _, _, r in runs],
        "on_over_off": round(ratio, 3),
        "target_ratio": ORDERING_TARGET_RATIO,
    }
    checks = [c for off, on, _ in runs for c in off["checks"] + on["checks"]]
    out["passed"] = all(c["ok"] for c in checks) and ratio >= ORDERING_TARGET_RATIO
    out["checks"] = checks
    print(ordering_table(out))
    return out


async def _checkpoint(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("CHECKPOINT", timeout=None)
    finally:
        await conn.close()


def _drain(
    backend: Backend,
    settings: settings_mod.Settings,
    config: Path,
    workdir: Path,
    events: int,
    timeout_s: float,
    profile: Path | None,
) -> dict[str, Any]:
    """Start the worker, wait until it has drained the backlog, stop it; the figures."""
    cpu0, busy0 = all_cpu_s(), machine_busy_s()
    with (workdir / "settle.log").open("ab") as log:
        worker = subprocess.Popen(
            [*GATEWAY, "settle", "--config", str(config)], cwd=ROOT, stdout=log, stderr=log
        )
    spy = _profiler(worker.pid, profile) if profile else None
    try:
        first_s, done_s = asyncio.run(_wait_drained(backend, settings, events, timeout_s))
        cpu1, busy1 = all_cpu_s(), machine_busy_s()
        ours1, all1 = _pg_cpu_s(backend.database, cpu1)  # while its backends still live
    finally:
        _stop(worker)
        if spy is not None:
            spy.wait(timeout=60)
    worker_cpu_s = cpu1.get(worker.pid, ("", 0.0))[1]  # all of it: the process is new
    ours0, all0 = _pg_cpu_s(backend.database, cpu0)
    nats_pid = backend.nats.proc.pid if backend.nats.proc else -1
    nats_s = cpu1.get(nats_pid, ("", 0.0))[1] - cpu0.get(nats_pid, ("", 0.0))[1]
    tigerbeetle_s = _comm_cpu_s(cpu1, "tigerbeetle") - _comm_cpu_s(cpu0, "tigerbeetle")
    figures = {
        "wall_s": round(done_s, 2),
        "events_per_s": round(events / done_s, 1),
        "startup_s": round(first_s or 0.0, 2),
        "drain_events_per_s": round(events / max(done_s - (first_s or 0.0), 1e-9), 1),
        "worker_cpu_us_per_event": round(1e6 * worker_cpu_s / events, 1),
        "worker_cpu_pct": round(100 * worker_cpu_s / done_s, 1),
        "postgres_db_cpu_us_per_event": round(1e6 * (ours1 - ours0) / events, 1),
        "postgres_cpu_pct": round(100 * (all1 - all0) / done_s, 1),
        "nats_cpu_pct": round(100 * nats_s / done_s, 1),
        "machine_busy_pct": round(100 * (busy1 - busy0) / done_s, 1),
    }
    if tigerbeetle_s > 0:  # a cluster on this machine: its CPU, as PostgreSQL's
        figures["tigerbeetle_cpu_pct"] = round(100 * tigerbeetle_s / done_s, 1)
    print(
        f"  drained in {figures['wall_s']} s: {figures['events_per_s']:,.0f} events/s "
        f"({figures['drain_events_per_s']:,.0f}/s after {figures['startup_s']} s start-up); "
        f"worker {figures['worker_cpu_us_per_event']} µs CPU/event"
    )
    return figures


def _comm_cpu_s(cpu: dict[int, tuple[str, float]], comm: str) -> float:
    return sum(seconds for name, seconds in cpu.values() if name == comm)


def _profiler(pid: int, output: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling the worker until it exits (collapsed stacks, for flame graphs)."""
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        raise RuntimeError("--profile needs py-spy (pip install py-spy into the venv)")
    argv = [spy, "record", "--pid", str(pid), "--format", "raw", "-o", str(output), "--rate", "200"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the worker finishes its batch), then SIGKILL."""
    processes.stop(proc, 30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.settlement", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--events", type=int, default=BACKLOG_EVENTS, help="backlog size")
    parser.add_argument("--refund-share", type=float, default=0.02, help="share of refunds")
    parser.add_argument("--json", type=Path, help="also write the result to this file")
    parser.add_argument(
        "--profile", type=Path, help="sample the worker with py-spy into this file (raw stacks)"
    )
    parser.add_argument(
        "--ledger",
        choices=LEDGERS,
        default="postgres",
        help="the ledger settled into (tigerbeetle: the cluster TIGERBEETLE_ADDRESS names)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        help="the worker's [settlement] batch_size (default: the configuration's default)",
    )
    parser.add_argument(
        "--ordering",
        choices=("on", "off", "both"),
        default="on",
        help="[ordering] enabled for the drain; both: off and on, and their ratio",
    )
    parser.add_argument(
        "--keys", type=int, default=ORDER_KEYS, help="ordering keys the events are spread over"
    )
    parser.add_argument(
        "--pairs",
        type=int,
        default=1,
        help="with --ordering both: off-then-on pairs to run, judged by the median ratio",
    )
    args = parser.parse_args(argv)
    if args.keys < 1:
        parser.error("--keys must be at least 1")
    if args.pairs < 1 or (args.pairs > 1 and args.ordering != "both"):
        parser.error("--pairs must be at least 1, and more than 1 only with --ordering both")
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    options: dict[str, Any] = {
        "refund_share": args.refund_share,
        "profile": args.profile,
        "ledger": args.ledger,
        "batch_size": args.batch_size,
        "keys": args.keys,
    }
    try:
        if args.ordering == "both":
            result = ordering_comparison(args.events, args.pairs, **options)
            checks = result["checks"]
        else:
            result = settlement_benchmark(args.events, ordering=args.ordering == "on", **options)
            checks = result["checks"]
    except LedgerNotHere as exc:
        print(f"bench.settlement: --ledger {args.ledger}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0 if all(c["ok"] for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
