"""Scenario 12: `gateway backfill stripe` SIGKILLed mid-run and restarted, while live
webhook deliveries of the same events arrive.

A Stripe stand-in API (tests/support/provider_apis.py) holds every planned event, with
small, slow pages. The load generator delivers a random half of them, signed, 1-5 times
each; the other half the provider "gave up" on and only the API has. The backfill runs
as a process concurrently with that load, is killed after its first pages and started
again with the same command, and must continue from its saved cursor (the stand-in sees
`starting_after` on the restart's first request). `serve` and `settle` run throughout.

The audit counts every event the API holds as owed (an event only the backfill could
bring gets a synthetic 2xx answer, `backfill`): exactly one row each, published, in the
stream, one ledger transfer per settling event, no phantom, the ledger balanced.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from chaos.harness import profiles
from chaos.loadgen import Answer
from chaos.procs import GatewayProcess
from chaos.workload import LoadSpec, PlannedEvent, providers_config
from tests.support.provider_apis import API_KEY, running_apis, stand_in_keys
from tests.support.settlement import fetch

PROFILE = {
    "fast": {"events": 160, "rate": 40.0, "page": 8, "delay_s": 0.25, "kill_after_pages": 4},
    "full": {"events": 1000, "rate": 60.0, "page": 20, "delay_s": 0.3, "kill_after_pages": 10},
}
LIVE_SHARE = 0.5  # of the events, delivered as webhooks too; the rest only the API has


def _as_stripe_event(e: PlannedEvent, created: datetime) -> PlannedEvent:
    """The planned body as Stripe's API shows the event (the webhook carries the same)."""
    doc = orjson.loads(e.body) | {
        "created": int(created.timestamp()),
        "livemode": False,
        "api_version": "2024-06-20",
    }
    return dataclasses.replace(e, body=orjson.dumps(doc))


async def _pages_seen(apis: Any, pages: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while sum(r.startswith("/v1/events") for r in apis.requests) < pages:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the backfill did not reach page {pages}")
        await asyncio.sleep(0.05)


async def _exited(process: GatewayProcess, timeout_s: float = 120.0) -> int:
    deadline = time.monotonic() + timeout_s
    while process.proc is not None and process.proc.poll() is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{process.name} still running; see {process.log_path}")
        await asyncio.sleep(0.1)
    return process.proc.returncode if process.proc is not None else -1


def _report(process: GatewayProcess) -> dict[str, Any]:
    """The last `backfill done` log line: the run's counts."""
    done = [line for line in process.log_lines() if "backfill done" in line.values()]
    return done[-1] if done else {}


@pytest.mark.parametrize("profile", profiles())
async def test_backfill_killed_and_restarted_alongside_live_deliveries(
    profile, make_scenario, database_url, nats_node, monkeypatch
):
    p = PROFILE[profile]
    monkeypatch.setenv("PROVIDER_API_KEY", API_KEY)  # read by the gateway processes
    async with running_apis(page_size=p["page"], delay_s=p["delay_s"]) as apis:
        stripe = providers_config()["stripe"] | stand_in_keys(apis.url)
        sc = make_scenario(
            f"s12_backfill-{profile}",
            database_url,
            nats_node.url,
            providers={**providers_config(), "stripe": stripe},
        )
        await sc.open_merchants()
        sc.serve()
        sc.settle()
        await sc.ready("serve")

        # Stripe only (the API is Stripe's), no refunds (their order is the load's topic).
        spec = LoadSpec(events=p["events"], rate_per_s=p["rate"], standard=0.0, refunds=0.0)
        gen = sc.load(spec)
        rng = random.Random(12)
        now = datetime.now(UTC)
        since = now - timedelta(hours=1)
        events, offline = [], []
        for e in gen.record.events:
            e = _as_stripe_event(e, since + timedelta(seconds=10 + e.index))
            if e.kind != "forged" and rng.random() >= LIVE_SHARE:
                offline.append(e)
                e = dataclasses.replace(e, deliveries=0)
            events.append(e)
        gen.record.events = events
        gen.total = sum(e.deliveries for e in events)
        apis.stripe_events = [
            orjson.loads(e.body) for e in events if e.kind != "forged"
        ]  # a forged event is one the provider never sent

        running = asyncio.create_task(gen.run())
        window = ["--since", since.isoformat(), "--until", now.isoformat()]
        backfill = sc.backfill("stripe", *window)
        await _pages_seen(apis, p["kill_after_pages"])
        backfill.kill()
        killed_after = sum(r.startswith("/v1/events") for r in apis.requests)
        rows_at_kill = await fetch(
            database_url, "SELECT count(*) AS n FROM processed_webhooks WHERE source = 'backfill'"
        )
        apis.requests.clear()
        backfill.start()
        code = await _exited(backfill)
        restart_first = apis.requests[0] if apis.requests else ""
        record = await running
        # What only the API had is owed as well: count it as answered by the backfill.
        record.answers += [Answer(e.index, 0, 0, 200, "backfill", 0.0, 0.0) for e in offline]

        result = await sc.finish(record)
    report = _report(backfill)
    print(
        f"backfill killed after {killed_after} pages with {rows_at_kill[0]['n']} recovered; "
        f"restart began at {restart_first}; its run: fetched {report.get('fetched')}, "
        f"present {report.get('present')}, recovered {report.get('recovered')}"
    )
    assert result.ok, result.table()
    assert code == 0, f"see {backfill.log_path}"
    assert "starting_after=" in restart_first, "the restarted backfill started over"
    assert result.figures["never_2xx"] == 0 and result.figures["unexpected_parked"] == 0
    assert result.figures["events_2xx"] == len(apis.stripe_events)  # the forged got 401s
    rows = await fetch(
        database_url,
        "SELECT source, count(*) AS n FROM processed_webhooks "
        "WHERE event_id LIKE '%\\_' || $1 || '\\_%' GROUP BY source",
        record.run,
    )
    by_source = {r["source"]: int(r["n"]) for r in rows}
    assert sum(by_source.values()) == len(apis.stripe_events)
    # Every offline event came by backfill; live ones may have, when it got there first.
    assert by_source.get("backfill", 0) >= len(offline)
    progress = await fetch(
        database_url,
        "SELECT count(*) FILTER (WHERE completed_at IS NULL) AS open FROM backfill_progress",
    )
    assert progress[0]["open"] == 0, "the restarted run did not finish the killed one's window"
