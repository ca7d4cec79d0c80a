"""The end-to-end run: `gateway serve` and `gateway settle` together, as `make run` runs
them, from the first request to the last ledger transfer.

One fresh database and private nats-server (`sync_interval: always`), `gateway
currency-stub` and a fresh Redis key prefix for the rate cache, the merchant's account
opened (`gateway ledger open-account`, as scripts/run.sh does), then `gateway serve`
with the shipped settings (the relay inline unless `--outbox relay`) and `gateway settle`
on the same config. Two passes:

1. **Burst.** wrk posts unique Stripe-signed USD payments for `--duration` seconds (64
   connections). Then the run waits, looking at JetStream every 0.25 s (stream and
   consumer info: two small requests, nothing asked of PostgreSQL until JetStream says
   the consumer caught up), until the settle consumer has acknowledged everything.
   The figures come from timestamps stored along the way, not from when the bench
   happened to look: the first and last request are the burst rows' earliest and latest
   `received_at` (the gateway stamps a request as it reads it), the last message on the
   stream is the timestamp JetStream stored with it, and the last settlement is the
   latest `settled_at` of the burst's settlements (`now()` of the transaction that marks
   them settled, after their transfers were posted: at most that transaction early).
   accepted/s is wrk's (answers `accepted` over wrk's duration); on-stream/s and
   settled/s count from the first request to the last message / the last settlement;
   the lag is the last settlement (or message) less the last accepted request.
2. **Paced.** An open-loop load (bench/paced.py) at half of what the chain sustained
   in the burst (the slowest of accepted/s, on-stream/s, settled/s; `--paced-rate`
   overrides) for `--paced-s` seconds. Webhook-to-settled latency per event is its
   settlement's `settled_at` in PostgreSQL less the time the request was due.

Checks at the end, over both passes: one row per accepted event, one stream message per
row, one settled settlement and one transfer per row, no dead letters, the ledger
balanced and the merchant's balance (read through the gateway's ledger interface) equal
to the sum of the accepted amounts (read from the stored bodies).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncpg
import nats

from bench.e2e_figures import (
    BurstTimes,
    LedgerFacts,
    burst_figures,
    cpu_per_event_us,
    end_to_end_checks,
    latency_figures,
    paced_rate,
)
from bench.events import MERCHANT_ID, event_id, new_tag, signed_requests
from bench.paced import PacedResult, run_paced
from bench.passes import describe, measure_pass, postgres_per_row, signed_pool
from bench.procs import CpuMeter
from bench.report import RUN_TITLES, check
from bench.servers import (
    ROOT,
    STRIPE_SECRET,
    Backend,
    count_rows,
    currency_stub,
    drop_cache,
    fresh_backend,
    gateway_server,
    server_counters,
    stream_count,
)
from bench.wrk import Load, WrkResult
from gateway import settings as settings_mod
from gateway.adapters.postgres import open_pool
from gateway.adapters.postgres.outbox import outbox_stats
from gateway.core.ledger.ids import merchant_account_id
from gateway.wiring.settlement import open_ledger
from tests.support.services import REDIS_URL

GATEWAY = [sys.executable, "-m", "gateway"]
POLL_S = 0.25


def _settings_for(sections: dict[str, dict[str, Any]], stub_url: str, prefix: str) -> Any:
    out = {name: dict(values) for name, values in sections.items()}
    out["redis"] = {"url": REDIS_URL, **out.get("redis", {})}
    out["currency"] = {"url": stub_url, "cache_key_prefix": prefix, **out.get("currency", {})}
    # Nothing scrapes settle's /metrics here, and a fixed port may be taken.
    out.setdefault("settlement", {}).setdefault("metrics_port", 0)
    return out


async def _wait_settled(
    backend: Backend, settings: settings_mod.Settings, since_s: float, timeout_s: float
) -> dict[str, Any]:
    """Wait until the outbox is empty and the settle consumer has acknowledged every
    message on the stream, at least a second after the load stopped (requests in
    flight then are waited for). Returns when the bench saw it (0.25 s resolution: the
    figures use stored timestamps instead)."""
    stream, consumer = settings.nats.stream, settings.settlement.consumer
    nc = await nats.connect(backend.nats.url)
    conn = await asyncpg.connect(backend.dsn)
    try:
        js = nc.jetstream()
        while True:
            waited_s = time.monotonic() - since_s
            caught_up = False
            with contextlib.suppress(nats.errors.Error):
                last_seq = (await js.stream_info(stream)).state.last_seq
                info = await js.consumer_info(stream, consumer)
                acked = info.ack_floor.stream_seq if info.ack_floor else 0
                caught_up = not info.num_pending and not info.num_ack_pending
                caught_up = caught_up and acked >= last_seq
            if caught_up and waited_s >= 1.0 and (await outbox_stats(conn))[0] == 0:
                return {"seen_settled_after_load_s": round(waited_s, 2), "drained": True}
            if waited_s >= timeout_s:
                return {"seen_settled_after_load_s": None, "drained": False}
            await asyncio.sleep(POLL_S)
    finally:
        await conn.close()
        await nc.close()


async def _wait_consumer(backend: Backend, settings: settings_mod.Settings) -> None:
    """`gateway settle` is ready once its durable consumer exists."""
    nc = await nats.connect(backend.nats.url)
    try:
        js = nc.jetstream()
        for _ in range(300):
            with contextlib.suppress(nats.errors.Error):
                await js.consumer_info(settings.nats.stream, settings.settlement.consumer)
                return
            await asyncio.sleep(0.1)
        raise RuntimeError("gateway settle created no consumer within 30 s")
    finally:
        await nc.close()


async def _last_on_stream(backend: Backend, stream: str) -> tuple[int, float | None]:
    """(messages on the stream, the stored timestamp of its last one)."""
    nc = await nats.connect(backend.nats.url)
    try:
        js = nc.jetstream()
        state = (await js.stream_info(stream)).state
        if not state.messages:
            return 0, None
        last = await js.get_msg(stream, seq=state.last_seq)
        return state.messages, last.time.timestamp() if last.time else None
    finally:
        await nc.close()


_BURST_SQL = """
SELECT count(*) AS rows, max(id) AS max_id,
       extract(epoch FROM min(received_at))::float8 AS first_s,
       extract(epoch FROM max(received_at))::float8 AS last_s,
       (SELECT count(*) FROM settlements s JOIN processed_webhooks w
          ON w.provider = s.provider AND w.event_id = s.source_event_id
        WHERE s.state = 'settled') AS settled,
       (SELECT extract(epoch FROM max(settled_at))::float8 FROM settlements) AS settled_s
FROM processed_webhooks
"""


def _burst_times(backend: Backend, stream: str) -> tuple[BurstTimes, int]:
    """The burst's stored timestamps (it is the first traffic of the run), and the
    highest row id it left."""

    async def read() -> asyncpg.Record | None:
        conn = await asyncpg.connect(backend.dsn)
        try:
            return await conn.fetchrow(_BURST_SQL)
        finally:
            await conn.close()

    row = asyncio.run(read())
    if row is None or not row["rows"]:
        raise RuntimeError("the burst left no rows")
    messages, last_on_stream_s = asyncio.run(_last_on_stream(backend, stream))
    times = BurstTimes(
        first_request_s=row["first_s"],
        last_accepted_s=row["last_s"],
        last_on_stream_s=last_on_stream_s,
        last_settled_s=row["settled_s"],
        accepted=row["rows"],
        on_stream=messages,
        settled=row["settled"],
    )
    return times, int(row["max_id"])


def _settled_at(dsn: str, event_ids: Sequence[str]) -> dict[str, float]:
    async def read() -> dict[str, float]:
        conn = await asyncpg.connect(dsn)
        try:
            rows = await conn.fetch(
                "SELECT source_event_id, extract(epoch FROM settled_at)::float8 AS s"
                " FROM settlements WHERE state = 'settled' AND source_event_id = ANY($1)",
                list(event_ids),
            )
        finally:
            await conn.close()
        return {r["source_event_id"]: r["s"] for r in rows}

    return asyncio.run(read())


_FACTS_SQL = """
SELECT (SELECT count(*) FROM processed_webhooks) AS rows,
       (SELECT coalesce(sum((convert_from(body, 'UTF8')::jsonb
                #>> '{data,object,amount_received}')::bigint), 0)
          FROM processed_webhooks) AS accepted_amount,
       (SELECT count(*) FROM settlements) AS settlements,
       (SELECT count(*) FROM settlements WHERE state = 'settled') AS settled,
       (SELECT count(*) FROM settlements s JOIN processed_webhooks w
          ON w.provider = s.provider AND w.event_id = s.source_event_id) AS matched,
       (SELECT count(*) FROM dlq_webhooks) AS dlq_rows
"""


async def _ledger_facts(settings: settings_mod.Settings) -> dict[str, int | None]:
    async with open_pool(settings.database_url, max_size=2) as pool:
        async with pool.acquire() as conn:
            row = dict(await conn.fetchrow(_FACTS_SQL) or {})
            transfers = None
            if settings.ledger.backend == "postgres":
                transfers = await conn.fetchval("SELECT count(*) FROM ledger_transfers")
        async with open_ledger(settings, pool) as ledger:
            account = merchant_account_id(MERCHANT_ID, settings.settlement.currency)
            balance = await ledger.balance(account)
            totals = await ledger.check()
    return {
        **{k: int(v) for k, v in row.items()},
        "transfers": None if transfers is None else int(transfers),
        "merchant_credits": balance.credits_posted if balance else 0,
        "merchant_debits": balance.debits_posted if balance else 0,
        "ledger_debits": totals.debits_posted,
        "ledger_credits": totals.credits_posted,
    }


def _open_account(config: Path) -> None:
    argv = [*GATEWAY, "ledger", "open-account", MERCHANT_ID, "--config", str(config)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
    if done.returncode:
        raise RuntimeError(f"gateway ledger open-account failed: {done.stderr.strip()}")


def _paced_pass(
    base_url: str, rate_per_s: float, seconds: float, conns: int
) -> tuple[PacedResult, list[str]]:
    """The paced load with events signed before it starts; the result and the event ids."""
    tag, host = new_tag(), base_url.removeprefix("http://")
    count = max(1, math.ceil(rate_per_s * seconds))
    requests = list(signed_requests(tag, 0, count, host, STRIPE_SECRET, int(time.time())))
    return run_paced(base_url, requests, rate_per_s, conns), [
        event_id(tag, 0, i) for i in range(count)
    ]


def end_to_end_run(
    args: argparse.Namespace,
    load: Load,
    workdir: Path,
    sections: dict[str, dict[str, Any]],
    bare_rps: float | None,
) -> dict[str, Any]:
    """The whole run; its record for results.json (`new` is the burst's wrk pass, so
    the main table shows it beside the other servers)."""
    print(f"== {RUN_TITLES['end_to_end']}")
    prefix = f"fx-bench-{uuid.uuid4().hex[:8]}"
    record: dict[str, Any] = {"title": RUN_TITLES["end_to_end"]}
    with fresh_backend() as backend, contextlib.ExitStack() as stack:
        stack.callback(drop_cache, prefix)
        stub = currency_stub(workdir, "end_to_end-stub")
        stub.start()
        stack.callback(stub.stop)
        record["settings"] = gw = _settings_for(sections, stub.base_url, prefix)
        server = gateway_server(
            backend, workdir, "end_to_end", gw, args.workers, args.relay_nice, settle=True
        )
        config = workdir / "end_to_end.toml"
        settings = settings_mod.load(str(config))
        _open_account(config)
        server.start()
        stack.callback(server.stop)
        asyncio.run(_wait_consumer(backend, settings))
        nats_pid = backend.nats.proc.pid if backend.nats.proc else None

        # 1. The burst, and the CPU of every process until the last settlement.
        per_thread = math.ceil(args.pool_rate * load.duration_s / load.threads)
        pool = signed_pool(workdir, "end_to_end-burst", server, load, per_thread, new_tag())
        whole = CpuMeter(
            server.pid, nats_pid, server.sidecar_pids, backend.database, server.settler_pids
        )
        whole.start()
        burst, record["new"] = measure_pass(server, pool, load, nats_pid, database=backend.database)
        ended_s = time.monotonic()
        pool.remove()
        postgres_per_row(record["new"], count_rows(backend.dsn))
        describe("burst", record["new"])
        record["after_burst"] = asyncio.run(
            _wait_settled(backend, settings, ended_s, args.settle_timeout_s)
        )
        cpu = whole.stop()
        times, _ = _burst_times(backend, settings.nats.stream)
        accepted_per_s = (burst.accepted or 0) / burst.duration_s if burst.duration_s else 0.0
        record["burst"] = burst_figures(times, accepted_per_s, bare_rps)
        record["burst"]["events"] = times.accepted
        record["burst"]["cpu_until_settled"] = cpu
        record["burst"]["cpu_us_per_event"] = cpu_per_event_us(cpu, times.settled)
        print(burst_line(record))

        # 2. The paced load at half the capacity the burst showed.
        rate = args.paced_rate or paced_rate(record["burst"])
        paced, ids = _paced_pass(server.base_url, rate, args.paced_s, load.connections)
        ended_s = time.monotonic()
        record["after_paced"] = asyncio.run(
            _wait_settled(backend, settings, ended_s, args.settle_timeout_s)
        )
        at = _settled_at(backend.dsn, ids)
        record["paced"] = {
            "rate_per_s": rate,
            "seconds": args.paced_s,
            "latency_from": "settlements.settled_at - the request's due time",
            **latency_figures(
                paced.due_s, paced.sent_s, paced.answered_s, [at.get(i) for i in ids]
            ),
            "non_2xx": paced.non_2xx,
            "failed": paced.failed,
            "accepted": sum(paced.accepted),
        }
        print(paced_line(record))

        # 3. What the ledger and every stage hold.
        outcomes = server_counters(server)["outcomes"]
        facts = asyncio.run(_ledger_facts(settings))
        record["checks"] = _checks(burst, paced, outcomes, facts, backend, settings)
    for c in record["checks"]:
        print(f"  [{'ok' if c['ok'] else 'FAIL'}] {c['check']}: {c['detail']}")
    return record


def _checks(
    burst: WrkResult,
    paced: PacedResult,
    outcomes: dict[str, int],
    facts: dict[str, int | None],
    backend: Backend,
    settings: settings_mod.Settings,
) -> list[dict[str, Any]]:
    def num(key: str) -> int:
        return int(facts[key] or 0)

    ledger = LedgerFacts(
        rows=num("rows"),
        accepted_answers=outcomes.get("accepted", -1),
        wrk_accepted=(burst.accepted or 0) + sum(paced.accepted),
        unanswered=burst.unanswered + paced.failed,
        stream_messages=stream_count(backend.nats.url, settings.nats.stream),
        settlements=num("settlements"),
        settled=num("settled"),
        settlement_rows_matched=num("matched"),
        transfers=facts["transfers"],
        dlq_rows=num("dlq_rows"),
        accepted_amount_minor=num("accepted_amount"),
        merchant_credits_minor=num("merchant_credits"),
        merchant_debits_minor=num("merchant_debits"),
        ledger_debits=num("ledger_debits"),
        ledger_credits=num("ledger_credits"),
    )
    errors = burst.socket_errors + burst.timeouts
    non_2xx = burst.non_2xx if burst.non_2xx is not None else burst.wrk_errors_status
    return [
        check("burst sent each event at most once", burst.wraps == 0,
              f"{burst.wraps} pool wrap(s); raise --pool-rate if not 0"),
        check("burst: every answer a 2xx, no socket errors or timeouts",
              non_2xx == 0 and errors == 0, f"non-2xx {non_2xx}, errors {errors}"),
        check("paced: every event answered 'accepted'",
              sum(paced.accepted) == len(paced.statuses),
              f"{sum(paced.accepted):,} of {len(paced.statuses):,}; non-2xx {paced.non_2xx}, "
              f"failed {paced.failed}"),
        *end_to_end_checks(ledger),
    ]  # fmt: skip


def burst_line(record: dict[str, Any]) -> str:
    b = record["burst"]

    def rate(key: str) -> str:
        return "-" if b[key] is None else f"{b[key]:,.0f}/s"

    return (
        f"  {'':<11} {b['events']:,} events: accepted {rate('accepted_per_s')}, on the stream "
        f"{rate('on_stream_per_s')}, settled {rate('settled_per_s')} (settled/accepted "
        f"{b['settled_over_accepted']}); ledger lag after the load "
        f"{b['ledger_lag_after_load_s']} s, stream lag {b['stream_lag_after_load_s']} s"
    )


def paced_line(record: dict[str, Any]) -> str:
    p = record["paced"]
    lat, ans = p["webhook_to_settled_ms"], p["answer_ms"]
    return (
        f"  {'paced':<11} {p['rate_per_s']:,.0f}/s for {p['seconds']} s: webhook->settled "
        f"p50 {lat['p50']} ms, p99 {lat['p99']} ms (max {lat['max']}); answers p50 "
        f"{ans['p50']} ms, p99 {ans['p99']} ms; sends late by p99 "
        f"{p['send_delay_ms']['p99']} ms; {p['settled']:,} of {p['events']:,} settled"
    )
