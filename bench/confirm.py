"""Confirm stage throughput: how fast `gateway confirm` turns a backlog of Mollie classic
webhooks (`id=tr_…`) into confirmed events, against a stand-in of Mollie's API that
answers at once, its CPU and memory, and what an API outage leaves behind (figures:
docs/performance.md, "Confirm stage").

One run: a fresh migrated database, the stand-in (`tests.support.mollie_api`) serving N
paid payments in a process of its own (this module with `--serve-api PORT`: uvicorn, and
a count of its answers by status and of each payment's `200`s), and N webhooks recorded
as `POST /webhooks/mollie` records them: shaped by the gateway's own shaper for the
provider (`ingest.endpoints.webhook_shaper`: unpublished, `awaits_confirmation`) and
written by `record_events` in groups of 64 (the group commit's size), which owes each
its fetch in `confirmations`. Then, in the same run and against the same stand-in:

1. the baseline: this process GETs the N payments, as many at once as the stage may
   (`--concurrency`), through the stage's own HTTP adapter (`provider_api.http_json`),
   nothing else (no claim, no parse, no database): what the fetching alone allows;
2. `gateway confirm --metrics-port 0` as a process of its own, timed from its start
   until no `confirmations` row is pending; its CPU from /proc, its peak RSS (VmHWM).
   `[confirm] rate_per_s` is 10,000 (the most allowed), so the pace is not the limit,
   unless `--rate-per-s` says otherwise.

With `--outage-s S` the stand-in answers 503 to everything from just before the stage
starts until S seconds after; `[confirm] max_attempts = 1000` and `max_delay_s = 5` so
the outage is waited out and the recovery is prompt. Reported: the stage's RSS once
every webhook was tried (the outage's start), at the outage's end and at the end, and
how long the backlog took to drain once the API answered again.

Checked: every `confirmations` row `confirmed`, exactly N rows `tr_…:paid` with source
`confirmed` (one per payment, nothing else recorded), no dead letter, and the stand-in
answered `200` once per payment (a repeat is a fetch done twice).

    .venv/bin/python -m bench.confirm [--events N] [--rate-per-s R] [--concurrency C]
        [--outage-s S] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
import uvicorn

from bench.procs import CpuMeter, all_cpu_s, cpu_s, rss_kib
from bench.servers import ROOT, Backend, fresh_backend
from gateway import settings as settings_mod
from gateway.adapters.postgres import open_pool
from gateway.adapters.postgres.webhooks import record_events
from gateway.adapters.provider_api.http_json import open_client, request_bytes
from gateway.core.events.model import Event
from gateway.core.providers.mollie.classic import auth
from gateway.ingest.endpoints import ordered_subject, webhook_shaper
from gateway.settings import Settings
from tests.support.config_file import write_toml
from tests.support.mollie_api import API_KEY, MollieApi, stand_in_keys
from tests.support.services import free_port, wait_for_port

GATEWAY = [sys.executable, "-m", "gateway"]
KEY_ENV = "BENCH_MOLLIE_API_KEY"
GROUP_ROWS = 64  # webhooks per recording transaction: `[ingest] batch_max_rows`
MOST_RATE_PER_S = 10_000.0  # `[confirm] rate_per_s`'s bound: the pace is not the limit
ALL_TRIED_MOST_S = 120.0  # the longest an outage waits for every webhook's first try
FORM = {"content-type": "application/x-www-form-urlencoded"}
EMBED = [("embed", "refunds,chargebacks")]  # as `mollie.locate` asks


def payment_ids(events: int) -> list[str]:
    return [f"tr_bench{i:07d}" for i in range(events)]


# --- the stand-in, in a process of its own ----------------------------------------------


class CountingApi:
    """The stand-in's app, counting its answers by status and each payment's `200`s;
    `/bench/count`, `/bench/down`, `/bench/up` and `/bench/reset` steer it."""

    def __init__(self, api: MollieApi) -> None:
        self.api = api
        self.inner: Any = api.server.config.app  # the stand-in's Starlette app
        self.statuses: Counter[int] = Counter()
        self.fetched: Counter[str] = Counter()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        if path.startswith("/bench/"):
            await self._control(path, send)
            return
        status = 0

        async def sending(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        await self.inner(scope, receive, sending)
        self.statuses[status] += 1
        if status == 200:
            self.fetched[path.rpartition("/")[2]] += 1
        if len(self.api.requests) > 10_000:  # its own log of requests: not needed here
            self.api.requests.clear()
            self.api.authorizations.clear()

    async def _control(self, path: str, send: Any) -> None:
        if path == "/bench/down":
            self.api.down = True
        elif path == "/bench/up":
            self.api.down = False
        elif path == "/bench/reset":
            self.statuses.clear()
            self.fetched.clear()
        counts = {
            "statuses": {str(k): v for k, v in self.statuses.items()},
            "distinct": len(self.fetched),
            "fetched": sum(self.fetched.values()),
        }
        body = orjson.dumps(counts)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(body)).encode())]})  # fmt: skip
        await send({"type": "http.response.body", "body": body})


def serve_api(port: int, events: int) -> None:
    """The stand-in with `events` paid payments, on `port` until stopped."""
    api = MollieApi()
    api.port, api.url = port, f"http://127.0.0.1:{port}"  # the links it writes
    for payment_id in payment_ids(events):
        api.pay(payment_id, "10.00", "EUR", metadata={"merchant_id": "m_bench"})
    uvicorn.run(CountingApi(api), host="127.0.0.1", port=port, log_level="warning",
                access_log=False, lifespan="off")  # fmt: skip


def steer(api_url: str, what: str) -> dict[str, Any]:
    """`count`, `down`, `up` or `reset` the stand-in; its counts."""
    answer = httpx.post(f"{api_url}/bench/{what}", timeout=10)
    answer.raise_for_status()
    return dict(orjson.loads(answer.content))


# --- the run ---------------------------------------------------------------------------


def _config(backend: Backend, path: Path, api_url: str, args: argparse.Namespace) -> Path:
    confirm: dict[str, object] = {
        "rate_per_s": args.rate_per_s or MOST_RATE_PER_S,
        "concurrency": args.concurrency,
    }
    if args.outage_s > 0:  # waited out, and tried again promptly once it ends
        confirm.update(max_attempts=1000, max_delay_s=5.0)
    return write_toml(path, {
        "database": {"url": backend.dsn},
        "nats": {"url": backend.nats.url},
        "confirm": confirm,
        "providers": {"mollie": {"scheme": "mollie", **stand_in_keys(api_url, KEY_ENV)}},
    })  # fmt: skip


async def record_webhooks(settings: Settings, ids: list[str]) -> float:
    """Record a webhook per id as the gateway does; the seconds it took."""
    ordered = ordered_subject(settings.ordering, settings.settlement)
    shape = webhook_shaper(settings.providers["mollie"], ordered)
    started = time.perf_counter()
    events = [shape(FORM, f"id={payment_id}".encode()) for payment_id in ids]
    if not all(isinstance(e, Event) and e.awaits_confirmation for e in events):
        raise RuntimeError("the shaper did not make webhooks awaiting confirmation")
    async with open_pool(settings.database_url, max_size=1) as pool, pool.acquire() as conn:
        for at in range(0, len(events), GROUP_ROWS):
            group = [e for e in events[at : at + GROUP_ROWS] if isinstance(e, Event)]
            await record_events(conn, group)
    return time.perf_counter() - started


async def baseline(settings: Settings, ids: list[str], concurrency: int) -> tuple[float, float]:
    """(seconds, CPU seconds of this process) to GET each payment once through the
    stage's own HTTP adapter with `concurrency` under way: the fetching alone."""
    api = settings.providers["mollie"].api
    if api is None:
        raise RuntimeError("providers.mollie has no API")
    client = open_client(api, auth(api.key))
    gate = asyncio.Semaphore(concurrency)

    async def fetch(payment_id: str) -> None:
        async with gate:
            url = f"{api.url}/v2/payments/{payment_id}"
            answer = await request_bytes(client, "GET", url, api.limits, "bench", params=EMBED)
            if answer.status != 200:
                raise RuntimeError(f"the stand-in answered {answer.status} {answer.detail}")

    started, cpu0 = time.perf_counter(), time.process_time()
    try:
        await asyncio.gather(*(fetch(p) for p in ids))
    finally:
        await client.aclose()
    return time.perf_counter() - started, time.process_time() - cpu0


def hwm_kib(pid: int) -> int:
    """VmHWM (peak resident memory) of one process in KiB (0 if it is gone)."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def database_cpu_s(database: str) -> dict[int, float]:
    """CPU seconds so far of each PostgreSQL backend serving `database` (its title is
    "postgres: user database host state")."""
    found = {}
    for pid, (comm, used_s) in all_cpu_s().items():
        if comm == "postgres":
            with contextlib.suppress(OSError):
                if f" {database} " in Path(f"/proc/{pid}/cmdline").read_bytes().decode():
                    found[pid] = used_s
    return found


def mib(kib: int) -> float:
    return round(kib / 1024, 1)


_PROGRESS = """
SELECT count(*) FILTER (WHERE state = 'pending') AS pending,
       count(*) FILTER (WHERE state = 'confirmed') AS confirmed,
       coalesce(min(attempts), 0) AS least_attempts, coalesce(max(attempts), 0) AS most
FROM confirmations
"""


@dataclass
class Stage:
    """`gateway confirm` as a process of its own, watched through the database."""

    proc: subprocess.Popen[bytes]
    log_path: Path
    started: float
    database: str
    db_cpu0: dict[int, float]  # the database's backends' CPU seconds before the start

    async def progress(self, conn: asyncpg.Connection) -> asyncpg.Record:
        if self.proc.poll() is not None:
            tail = self.log_path.read_text(errors="replace").splitlines()[-15:]
            lines = "\n".join(tail)
            raise RuntimeError(f"gateway confirm exited {self.proc.returncode}:\n{lines}")
        row = await conn.fetchrow(_PROGRESS)
        if row is None:
            raise RuntimeError("no progress row")
        return row


async def _outage(
    stage: Stage, conn: asyncpg.Connection, api_url: str, outage_s: float
) -> dict[str, Any]:
    """The outage, from the stage's start: RSS once every webhook was tried, through
    the outage and at its end; then the API back. It lasts `outage_s`, and at least until
    every webhook was tried once: a stage that started slowly on a busy machine could
    otherwise meet the API already back, and the run would have felt no outage."""
    pid, ends = stage.proc.pid, stage.started + outage_s
    out: dict[str, Any] = {"outage_s": outage_s}
    tried_by = time.monotonic() + ALL_TRIED_MOST_S
    while (await stage.progress(conn))["least_attempts"] < 1:
        if time.monotonic() > tried_by:
            raise RuntimeError(f"not every webhook was tried within {ALL_TRIED_MOST_S:g} s")
        await asyncio.sleep(0.1)
    out["all_tried_after_s"] = round(time.monotonic() - stage.started, 1)
    # Down a second more after the last first try, so the figures while down are
    # sampled even when the stage's start took longer than `outage_s`.
    ends = max(ends, time.monotonic() + 1.0)
    out["rss_mib_at_outage_start"] = mib(rss_kib(pid))
    cpu0, t0, samples = cpu_s(pid), time.monotonic(), []
    while (left_s := ends - time.monotonic()) > 0:
        samples.append(rss_kib(pid))
        await asyncio.sleep(min(1.0, left_s))
    row = await stage.progress(conn)
    out["rss_mib_at_outage_end"] = mib(rss_kib(pid))
    out["rss_mib_max_during_outage"] = mib(max(samples, default=0))
    busy_pct = 100 * (cpu_s(pid) - cpu0) / (time.monotonic() - t0)
    out["cpu_pct_of_a_core_while_down"] = round(busy_pct, 1)
    out["attempts_at_outage_end"] = {"least": row["least_attempts"], "most": row["most"]}
    out["pending_at_outage_end"] = row["pending"]
    counts = await asyncio.to_thread(steer, api_url, "up")
    down_s = time.monotonic() - stage.started
    out["down_s"] = round(down_s, 1)
    out["answers_during_outage"] = counts["statuses"]
    out["answers_per_s_during_outage"] = round(sum(counts["statuses"].values()) / down_s, 1)
    return out


async def _watch(stage: Stage, dsn: str, api_url: str, args: argparse.Namespace) -> dict[str, Any]:
    """Wait until no fetch is pending (after the outage, if any); the figures."""
    proc = stage.proc
    out: dict[str, Any] = {}
    conn = await asyncpg.connect(dsn)
    try:
        if args.outage_s > 0:
            out["outage"] = await _outage(stage, conn, api_url, args.outage_s)
        back = time.monotonic()
        first: tuple[float, float, int] | None = None  # when, CPU, confirmed then
        deadline = back + args.timeout_s
        while (row := await stage.progress(conn))["pending"] > 0:
            if first is None and row["confirmed"] > 0:
                first = (time.monotonic(), cpu_s(proc.pid), row["confirmed"])
            if time.monotonic() > deadline:
                raise RuntimeError(f"still {row['pending']} pending after {args.timeout_s} s")
            await asyncio.sleep(0.05)
        done = time.monotonic()
        used_s, peak_kib, rss_end_kib = cpu_s(proc.pid), hwm_kib(proc.pid), rss_kib(proc.pid)
        # The stage's connections are opened after the start: each counts from zero.
        # This watcher's own backend (a look every 0.05 s) is left out.
        watcher = conn.get_server_pid()
        backends = database_cpu_s(stage.database)
        db_s = sum(s - stage.db_cpu0.get(pid, 0.0) for pid, s in backends.items() if pid != watcher)
    finally:
        await conn.close()
    n = args.events
    out.update(seconds=round(done - stage.started, 3), cpu_s=round(used_s, 3),
               peak_rss_mib=mib(peak_kib), rss_mib_end=mib(rss_end_kib),
               postgres_db_cpu_s=round(db_s, 3))  # fmt: skip
    if first is not None and n > first[2]:
        out["after_first"] = {
            "seconds": round(done - first[0], 3),
            "events": n - first[2],
            "cpu_us_per_event": round(1e6 * (used_s - first[1]) / (n - first[2]), 1),
            "start_to_first_s": round(first[0] - stage.started, 3),
        }
    if "outage" in out:
        out["outage"]["drained_s_after_api_back"] = round(done - back, 2)
        out["outage"]["rss_mib_at_end"] = mib(rss_end_kib)
    return out


def run_stage(
    config: Path, settings: Settings, api_url: str, workdir: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """`gateway confirm` from its start until nothing is pending; the figures."""
    env = {KEY_ENV: API_KEY, "PATH": "/usr/bin:/bin", "GATEWAY_LOG_LEVEL": "WARNING"}
    log_path = workdir / "confirm.log"
    if args.outage_s > 0:
        steer(api_url, "down")
    database = settings.database_url.rpartition("/")[2]
    db_cpu0 = database_cpu_s(database)
    meter = CpuMeter(server_pid=0)
    meter.start()
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [*GATEWAY, "confirm", "--config", str(config), "--metrics-port", "0"],
            cwd=ROOT, env=env, stdout=log, stderr=log,
        )  # fmt: skip
    stage = Stage(proc, log_path, time.monotonic(), database, db_cpu0)
    meter.server_pid = proc.pid
    try:
        out = asyncio.run(_watch(stage, settings.database_url, api_url, args))
        out["cpu"] = meter.stop()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    return out


_CHECKS = """
SELECT (SELECT count(*) FROM confirmations WHERE state = 'confirmed') AS confirmed_rows,
       (SELECT count(*) FROM confirmations WHERE state <> 'confirmed') AS other_rows,
       (SELECT count(*) FROM processed_webhooks WHERE source = 'confirmed') AS events,
       (SELECT count(*) FROM processed_webhooks WHERE source = 'confirmed'
          AND event_type = 'payment.paid' AND event_id = ANY($1::text[])) AS paid,
       (SELECT count(*) FROM dlq_webhooks) AS dead_letters,
       (SELECT extract(epoch FROM max(fetched_at) - min(fetched_at))
          FROM confirmations)::float8 AS fetched_span_s
"""


async def read_checks(dsn: str, ids: list[str]) -> dict[str, Any]:
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(_CHECKS, [f"{p}:paid" for p in ids])
    finally:
        await conn.close()
    return dict(row) if row is not None else {}


def confirm_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    """One run; the figures and the checks."""
    n, ids = args.events, payment_ids(args.events)
    load_before = os.getloadavg()
    with fresh_backend() as backend, tempfile.TemporaryDirectory(prefix="bench-confirm-") as tmp:
        workdir, port = Path(tmp), free_port()
        api_proc = subprocess.Popen(
            [sys.executable, "-m", "bench.confirm", "--serve-api", str(port), "--events", str(n)],
            cwd=ROOT,
        )
        try:
            wait_for_port(port, timeout_s=60)
            api_url = f"http://127.0.0.1:{port}"
            config = _config(backend, workdir / "gateway.toml", api_url, args)
            settings = settings_mod.load(config, env={**os.environ, KEY_ENV: API_KEY})
            recorded_s = asyncio.run(record_webhooks(settings, ids))
            api_cpu0 = cpu_s(api_proc.pid)
            base_s, base_cpu_s = asyncio.run(baseline(settings, ids, args.concurrency))
            api_cpu1 = cpu_s(api_proc.pid)
            steer(api_url, "reset")
            stage = run_stage(config, settings, api_url, workdir, args)
            api_cpu2 = cpu_s(api_proc.pid)
            seen = steer(api_url, "count")
            checks = asyncio.run(read_checks(backend.dsn, ids))
        finally:
            api_proc.send_signal(signal.SIGTERM)
            api_proc.wait(timeout=30)
    figures = figures_of(args, recorded_s, (base_s, base_cpu_s), stage, seen, checks,
                         (api_cpu1 - api_cpu0, api_cpu2 - api_cpu1))  # fmt: skip
    return {"load_average_before": load_before, **figures}


def figures_of(
    args: argparse.Namespace,
    recorded_s: float,
    base: tuple[float, float],
    stage: dict[str, Any],
    seen: dict[str, Any],
    checks: dict[str, Any],
    api_cpu_s: tuple[float, float],
) -> dict[str, Any]:
    n = args.events
    base_per_s = n / base[0]
    per_s = n / stage["seconds"]
    fetches = sum(seen["statuses"].values())
    cpu = stage["cpu"]
    figures: dict[str, Any] = {
        "events": n,
        "concurrency": args.concurrency,
        "rate_per_s": args.rate_per_s or MOST_RATE_PER_S,
        "outage_s": args.outage_s,
        "recorded_per_s": round(n / recorded_s, 1),
        "baseline_fetches_per_s": round(base_per_s, 1),
        "baseline_cpu_us_per_fetch": round(1e6 * base[1] / n, 1),
        "api_cpu_us_per_fetch_baseline": round(1e6 * api_cpu_s[0] / n, 1),
        "api_cpu_us_per_fetch_confirm": round(1e6 * api_cpu_s[1] / max(fetches, 1), 1),
        "confirm_s": stage["seconds"],
        "confirmed_per_s": round(per_s, 1),
        "ratio_to_baseline": round(per_s / base_per_s, 3),
        "confirm_cpu_us_per_event": round(1e6 * stage["cpu_s"] / n, 1),
        "postgres_db_us_per_event": round(1e6 * stage["postgres_db_cpu_s"] / n, 1),
        "peak_rss_mib": stage["peak_rss_mib"],
        "rss_mib_end": stage["rss_mib_end"],
        "machine_during_confirm": {k: cpu[k] for k in ("machine_busy_pct", "others")},
        "outage": stage.get("outage"),
    }
    after = stage.get("after_first")
    if after is not None:
        figures["after_first"] = after
        figures["confirmed_per_s_after_first"] = round(after["events"] / after["seconds"], 1)
        if checks.get("fetched_span_s"):
            figures["fetched_per_s_stored_span"] = round((n - 1) / checks["fetched_span_s"], 1)
    repeats = seen["fetched"] - seen["distinct"]
    figures["checks"] = {
        "confirmed_rows": checks["confirmed_rows"],
        "rows_not_confirmed": checks["other_rows"],
        "confirmed_events": checks["events"],
        "paid_events": checks["paid"],
        "dead_letters": checks["dead_letters"],
        "payments_fetched": seen["distinct"],
        "repeats": repeats,
        "answers_by_status": seen["statuses"],
    }
    figures["checks_ok"] = (
        checks["confirmed_rows"] == n
        and checks["other_rows"] == 0
        and checks["events"] == n
        and checks["paid"] == n
        and checks["dead_letters"] == 0
        and seen["distinct"] == n
        and repeats == 0
    )
    return figures


def summary(figures: dict[str, Any]) -> str:
    checks = figures["checks"]
    ok = "ok" if figures["checks_ok"] else "FAILED"
    outage = figures.get("outage")
    lines = [f"baseline {figures['baseline_fetches_per_s']:,.0f} fetches/s; "]
    if outage is None:
        steady = figures.get("confirmed_per_s_after_first")
        lines[0] += (
            f"confirmed {figures['confirmed_per_s']:,.0f} events/s from the stage's start "
            f"({figures['ratio_to_baseline']:.2f} of the baseline"
            + ("" if steady is None else f", {steady:,.0f}/s after the first")
            + f"), {figures['confirm_cpu_us_per_event']:,.0f} µs CPU/event (whole process), "
            f"PostgreSQL {figures['postgres_db_us_per_event']:,.0f} µs/event, peak RSS "
            f"{figures['peak_rss_mib']} MiB"
        )
    else:
        lines[0] += (
            f"outage {outage['down_s']:g} s (asked {outage['outage_s']:g}): "
            f"RSS {outage['rss_mib_at_outage_start']} MiB "
            f"at its start, {outage['rss_mib_at_outage_end']} at its end, "
            f"{outage['rss_mib_at_end']} at the end (peak {figures['peak_rss_mib']}); "
            f"{outage['answers_per_s_during_outage']:,.0f} answers/s while down, "
            f"{outage['cpu_pct_of_a_core_while_down']} % of a core; backlog drained "
            f"{outage['drained_s_after_api_back']} s after the API came back"
        )
    lines.append(
        f"checks {ok}: {checks['confirmed_rows']:,} confirmed, {checks['paid_events']:,} "
        f"paid events, {checks['dead_letters']} dead letters, {checks['payments_fetched']:,} "
        f"payments fetched, {checks['repeats']} repeats"
    )
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2_000, help="webhooks recorded")
    parser.add_argument("--rate-per-s", type=float, default=None,
                        help=f"[confirm] rate_per_s (default {MOST_RATE_PER_S:g})")  # fmt: skip
    parser.add_argument("--concurrency", type=int, default=8, help="[confirm] concurrency")
    parser.add_argument("--outage-s", type=float, default=0.0,
                        help="the stand-in answers 503 for this long after the start")  # fmt: skip
    parser.add_argument("--timeout-s", type=float, default=600.0)
    parser.add_argument("--json", type=Path, help="also write the result to this file")
    parser.add_argument("--serve-api", type=int, metavar="PORT", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.serve_api is not None:
        serve_api(args.serve_api, args.events)
        return 0
    # SIGTERM (a timeout, `kill`) becomes SystemExit: the stand-in is stopped and the
    # database dropped on the way out.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    figures = confirm_benchmark(args)
    print(json.dumps(figures, indent=2))
    print(summary(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0 if figures["checks_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
