"""What numbering keyed events costs PostgreSQL at ingest (figures: docs/performance.md).

The same 20,000 new events are recorded with `adapters.postgres.webhooks.insert_events`
in groups of 64 (the group commit's statement), once unkeyed and once keyed, several
ways; the figure is the CPU time of the database backend that ran the statements, read
from `/proc/PID/schedstat` around each pass, per event (so the client's own work does
not count). Each variant runs on an emptied table after a checkpoint; the first round
warms caches and plans and is not counted, and each figure is the median of the rounds.

    .venv/bin/python -m bench.ingest_numbering [--rounds N] [--events N]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg
import orjson

from gateway.adapters.postgres import migrate
from gateway.adapters.postgres.webhooks import WHOLE_STATEMENTS, insert_events
from gateway.core.events.model import Event, new_event
from tests.support.services import create_database, drop_database, unique_name

GROUP_ROWS = 64
#: The numbering budget: PostgreSQL CPU per new keyed event over an unkeyed one.
BUDGET_US = 10.0


@dataclass(frozen=True)
class Variant:
    """One way of recording the events: keyed over `keys` keys (0: unkeyed), with a
    share recorded beforehand so the groups hold repeats."""

    name: str
    keys: int
    repeats: float = 0.0


VARIANTS = (
    Variant("unkeyed", 0),
    Variant("keyed, 5,000 keys (about 4 events a key)", 5_000),
    Variant("keyed, 50 keys (about 400 events a key)", 50),
    Variant("keyed, every key new", 10**9),
    Variant("unkeyed, 5 % repeats", 0, 0.05),
    Variant("keyed, 5,000 keys, 5 % repeats", 5_000, 0.05),
)


def events(seed: int, count: int, keys: int) -> list[Event]:
    """`count` Stripe captures, keyed over `keys` payment intents (0: unkeyed)."""
    rand = random.Random(seed)
    at = datetime.now(UTC)
    out = []
    for i in range(count):
        event_id = f"evt_{seed}_{i:06d}"
        key = f"pi_{seed}_{rand.randrange(keys)}" if keys else None
        body = orjson.dumps(
            {
                "id": event_id,
                "type": "payment_intent.succeeded",
                "data": {"object": {"id": key or "pi_x", "amount": 1200}},
            }
        )
        out.append(
            new_event(
                "stripe",
                event_id,
                "payment_intent.succeeded",
                "webhooks.stripe.payment_intent.succeeded",
                {"content-type": "application/json"},
                body,
                at,
                order_key=key,
            )
        )
    return out


def _cpu_ns(pid: int) -> int:
    with open(f"/proc/{pid}/schedstat", encoding="ascii") as f:
        return int(f.read().split()[0])


async def _one_pass(
    conn: asyncpg.Connection, pid: int, recorded: list[Event], share: float
) -> float:
    """µs of the backend's CPU per event to record `recorded` in groups."""
    await conn.execute("TRUNCATE processed_webhooks, order_counters, dlq_webhooks, confirmations")
    if share:  # recorded before, not counted: the groups then hold repeats
        rand = random.Random(1)
        await insert_events(conn, [e for e in recorded if rand.random() < share])
    await conn.execute("CHECKPOINT")
    WHOLE_STATEMENTS.reset()  # each pass as a fresh process would start it
    before = _cpu_ns(pid)
    for i in range(0, len(recorded), GROUP_ROWS):
        await insert_events(conn, recorded[i : i + GROUP_ROWS])
    return (_cpu_ns(pid) - before) / 1000 / len(recorded)


async def measure(rounds: int, count: int) -> dict[str, float]:
    """The median µs of PostgreSQL CPU per event of each variant."""
    name = unique_name("gw_bench_numbering")
    dsn = await create_database(name)
    try:
        await migrate(dsn)
        conn = await asyncpg.connect(dsn)
        try:
            pid = await conn.fetchval("SELECT pg_backend_pid()")
            found: dict[str, list[float]] = {v.name: [] for v in VARIANTS}
            for r in range(rounds + 1):  # round 0 warms caches and plans
                for n, v in enumerate(VARIANTS):
                    us = await _one_pass(conn, pid, events(r * 100 + n, count, v.keys), v.repeats)
                    if r:
                        found[v.name].append(us)
        finally:
            await conn.close()
    finally:
        await drop_database(name)
    return {name: statistics.median(xs) for name, xs in found.items()}


def most_over_unkeyed(figures: dict[str, float]) -> float:
    """What numbering costs at most: the keyed variant furthest over unkeyed events (the
    variants with repeats are shown, not judged: a group of repeats records less)."""
    base = figures["unkeyed"]
    return max(us - base for name, us in figures.items() if "repeats" not in name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.ingest_numbering", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--rounds", type=int, default=3, help="counted rounds (median)")
    parser.add_argument("--events", type=int, default=20_000, help="events per pass")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.events < GROUP_ROWS:
        parser.error(f"--rounds must be at least 1 and --events at least {GROUP_ROWS}")
    started = time.monotonic()
    figures = asyncio.run(measure(args.rounds, args.events))
    base = figures["unkeyed"]
    print(f"== PostgreSQL CPU per new event, groups of {GROUP_ROWS} ({args.rounds} rounds)")
    for name, us in figures.items():
        print(f"  {name:<44} {us:6.1f} µs  ({us - base:+.1f} over unkeyed)")
    worst = most_over_unkeyed(figures)
    verdict = "within" if worst <= BUDGET_US else "over"
    print(f"numbering budget +{BUDGET_US:g} µs: {verdict} (at most {worst:+.1f} µs)")
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
