"""Scenario 17's parts: a migrated primary/standby pair, the loss of the primary's
machine, and what the run shows afterwards (how soon each process worked again, which
acknowledged events the failover lost, the durability lines the gateway logged).

Times: the load's clock (`LoadGen.elapsed`, `Answer.at_s`) for the answers, the wall
clock (`time.time()`) for what the database and JetStream stamp: one machine, one clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from chaos.audit import judge
from chaos.loadgen import LoadGen, LoadRecord
from chaos.observe import Key, Observed, read_database, read_stream, stream_messages
from chaos.procs import GatewayProcess
from chaos.proxy import FaultProxy
from gateway.adapters.postgres import migrate
from tests.support.pg_pair import PgPair
from tests.support.settlement import fetch

#: The audit's reason for an acknowledged event the database does not have: after a
#: failover, a commit the promoted standby never received.
NO_ROW = "got a 2xx but has no row"


#: The standby streams through a proxy adding this much, one way (a standby in another
#: region): what the primary acknowledged in the last this-long before its loss is
#: still on the link, and goes with the machine.
REPLICATION_LATENCY_MS = 50.0


@dataclass
class Topology:
    """The pair and the two proxies in front of the primary: the gateway's way to it and
    the standby's (the replication link)."""

    pair: PgPair
    primary: FaultProxy
    replication: FaultProxy


@contextlib.asynccontextmanager
async def migrated_pair(
    *, synchronous: bool, latency_ms: float = REPLICATION_LATENCY_MS
) -> AsyncIterator[Topology]:
    """A pair whose database is created and migrated on the primary before the standby
    is made from it, streaming through a proxy with `latency_ms` (and, synchronous,
    counted by the primary's commits); the gateway's own proxy to the primary."""
    pair = PgPair(synchronous=synchronous)
    primary = FaultProxy("127.0.0.1", pair.primary.port, name="pg-primary")
    replication = FaultProxy("127.0.0.1", pair.primary.port, name="pg-replication")
    try:
        await primary.start()
        await replication.start()
        if latency_ms:
            replication.add_toxic("latency", "downstream", latency=latency_ms)
        pair.replication_port = replication.listen_port
        await asyncio.to_thread(pair.start_primary)
        await migrate(await pair.create_database())
        await asyncio.to_thread(pair.start_standby)
        await pair.wait_streaming()
        yield Topology(pair, primary, replication)
    finally:
        await asyncio.to_thread(pair.cleanup)
        await primary.close()
        await replication.close()


@dataclass(frozen=True)
class Failover:
    """When the primary was lost and the standby promoted."""

    kill_wall: float  # time.time() at the loss
    kill_at: float  # the same instant on the load's clock
    promote_at: float  # `pg_ctl promote` run (load clock)
    promoted_at: float  # the standby takes writes (load clock)
    #: The run's events the standby held just before its promotion: what survived the
    #: loss (nothing could commit between the loss and the promotion).
    survived: frozenset[Key] = frozenset()


async def lose_primary(topology: Topology, gen: LoadGen, detect_s: float) -> Failover:
    """The primary's machine vanishes (its address a black hole to the gateway and to the
    standby, its processes SIGKILLed); `detect_s` later, as an HA tool's detection would
    be, the standby is promoted."""
    kill_wall, kill_at = time.time(), gen.elapsed()
    # First: no RST from the dying server reaches anyone, and what is still on the
    # replication link is lost with the machine.
    await topology.primary.set_blackhole(True)
    await topology.replication.set_blackhole(True)
    await asyncio.to_thread(topology.pair.kill_primary)
    await asyncio.sleep(detect_s)
    survived = await _recorded(topology.pair.standby_dsn, gen.record.run)
    promote_at = gen.elapsed()
    await topology.pair.promote()
    return Failover(kill_wall, kill_at, promote_at, gen.elapsed(), survived)


async def _recorded(database_url: str, run: str) -> frozenset[Key]:
    """The run's events a server holds (the standby, read-only, before its promotion)."""
    rows = await fetch(database_url, _RECORDED, run)
    return frozenset((r["provider"], r["event_id"]) for r in rows)


async def drain_recoverable(
    database_url: str, record: LoadRecord, timeout_s: float, *, quiet_s: float | None = None
) -> float:
    """Until every accepted event the database holds is published and has its outcome.

    An acknowledged event with no row never gets one (the failover lost its commit), so
    unlike `Scenario.drain` this does not wait for those. With `quiet_s` (asynchronous
    replication) it also stops once what is missing has not changed for that long: a
    settlement committed on the lost primary and acknowledged to the stream is gone with
    it, and nothing will deliver its message again.
    """
    started = time.monotonic()
    last: list[str] = []
    changed = started
    while time.monotonic() - started < timeout_s:
        seen = Observed(ledger_ok=True)
        await read_database(database_url, record.run, seen)
        problems = judge("drain", record, seen).problems
        pending = sorted(p for p in problems if p.startswith("lost:") and NO_ROW not in p)
        if pending != last:
            last, changed = pending, time.monotonic()
        if not pending or (quiet_s is not None and time.monotonic() - changed > quiet_s):
            await asyncio.sleep(1.0)  # let redeliveries in flight land before the audit
            break
        await asyncio.sleep(0.5)
    return time.monotonic() - started


async def stream_times(nats_url: str, run: str, stream: str = "WEBHOOKS") -> dict[Key, float]:
    """When JetStream stored each event of the run first (epoch seconds)."""
    first: dict[Key, float] = {}
    for key, at in await stream_messages(nats_url, stream, run):
        first[key] = min(first.get(key, at), at)
    return first


async def stream_copies(nats_url: str, run: str, stream: str = "WEBHOOKS") -> int:
    """How many events of the run the stream holds more than once: re-publishes the
    duplicate window (`Nats-Msg-Id`) did not absorb."""
    return sum(1 for n in (await read_stream(nats_url, stream, run)).values() if n > 1)


_RECORDED_AFTER = """
SELECT provider, event_id FROM processed_webhooks
WHERE event_id LIKE '%\\_' || $1 || '\\_%' AND received_at > to_timestamp($2)
"""
_RECORDED = """
SELECT provider, event_id FROM processed_webhooks WHERE event_id LIKE '%\\_' || $1 || '\\_%'
"""
_FIRST_SETTLED_AFTER = """
SELECT extract(epoch FROM min(settled_at))::float8 FROM settlements
WHERE settlement_id LIKE 'pi\\_' || $1 || '\\_%' AND settled_at > to_timestamp($2)
"""


def _since(at: float | None, start: float) -> float | None:
    return None if at is None else round(at - start, 2)


async def recovery(
    record: LoadRecord, failover: Failover, database_url: str, nats_url: str
) -> dict[str, float | None]:
    """Seconds from the loss of the primary to each process's first success after it.

    - serve: the first `accepted` answer to a delivery sent after the loss (its commit
      can only be on the new primary);
    - relay: the first message JetStream stored after the loss for a row recorded after
      it (a row only the new primary has, so the relay read it there);
    - settle: the first settlement committed after the loss (`settled_at`, the new
      primary's clock at its transaction's start).
    """
    answered = [
        a.at_s + a.took_s
        for a in record.answers
        if 200 <= a.status < 300 and a.outcome == "accepted" and a.at_s >= failover.kill_at
    ]
    conn = await asyncpg.connect(database_url, timeout=10)
    try:
        recorded = {
            (r["provider"], r["event_id"])
            for r in await conn.fetch(_RECORDED_AFTER, record.run, failover.kill_wall)
        }
        settled = await conn.fetchval(_FIRST_SETTLED_AFTER, record.run, failover.kill_wall)
    finally:
        await conn.close()
    stored = await stream_times(nats_url, record.run)
    relayed = [stored[k] for k in recorded if k in stored and stored[k] > failover.kill_wall]
    return {
        "promoted_s": round(failover.promoted_at - failover.kill_at, 2),
        "serve_first_2xx_s": _since(min(answered, default=None), failover.kill_at),
        "relay_first_publish_s": _since(min(relayed, default=None), failover.kill_wall),
        "settle_first_settled_s": _since(settled, failover.kill_wall),
    }


def lost_acknowledgements(record: LoadRecord, problems: list[str]) -> dict[str, int]:
    """What the failover lost of what was acknowledged: events missing on the new primary,
    events a later delivery recorded again (answered `accepted` twice: the first commit
    lost), and accepted events there without their settlement outcome (a settlement
    committed on the lost primary, its message acknowledged to the stream)."""
    accepted: Counter[int] = Counter(
        a.event for a in record.answers if 200 <= a.status < 300 and a.outcome == "accepted"
    )
    lost = [p for p in problems if p.startswith("lost:")]
    return {
        "acked_missing": sum(1 for p in lost if NO_ROW in p),
        "acked_recorded_again": sum(1 for n in accepted.values() if n > 1),
        "outcome_missing": sum(1 for p in lost if NO_ROW not in p),
    }


def durability_lines(
    process: GatewayProcess, *, before: float | None = None, after: float | None = None
) -> list[dict[str, Any]]:
    """The process's `database durability` log lines, as parsed JSON; optionally only
    those logged before or after an instant (epoch seconds)."""
    found = []
    for line in process.log_lines():
        if not str(line.get("msg", "")).startswith("database durability"):
            continue
        at = datetime.fromisoformat(str(line["ts"])).timestamp()
        if (before is None or at < before) and (after is None or at > after):
            found.append(line)
    return found
