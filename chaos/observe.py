"""What the audit looks at, read straight from the stores: the gateway's tables, the
ledger, the JetStream stream, and `gateway ledger check`.

Everything is scoped to one load run: its event ids and payment ids carry the run token,
so several runs can share a database without reading each other's rows.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import nats
import nats.errors
import nats.js.errors
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from tests.support.cli import GATEWAY
from tests.support.ordering_property import OrderingSummary, summary, violations
from tests.support.processes import clean_env

#: How long the stream's reader waits for its consumer to get a leader (see read_stream).
LEADERLESS_WAIT_S = 30.0

Key = tuple[str, str]  # (provider, event_id)


@dataclass(frozen=True)
class DeadLetter:
    stage: str
    error_class: str
    error_message: str


@dataclass
class Observed:
    """The stores' view of one run."""

    rows: dict[Key, bool] = field(default_factory=dict)  # → published (PubAck recorded)
    open_dlq: dict[Key, list[DeadLetter]] = field(default_factory=dict)
    transfers: Counter[tuple[str, int]] = field(default_factory=Counter)  # (settlement_id, code)
    stream: Counter[Key] | None = None  # None: the stream was not read
    ledger_ok: bool = False
    ledger_text: str = ""
    # The ordering property over the whole database (tests/support/ordering_property.py);
    # None: not checked (the drain's quick looks).
    order_violations: list[str] | None = None
    ordering: OrderingSummary | None = None


_ROWS = """
SELECT provider, event_id,
       outbox_published(pw) AS published
FROM processed_webhooks pw WHERE event_id LIKE '%\\_' || $1 || '\\_%'
"""
_DLQ = """
SELECT provider, event_id, stage, error_class, error_message
FROM dlq_webhooks WHERE NOT is_resolved AND event_id LIKE '%\\_' || $1 || '\\_%'
"""
_TRANSFERS = """
SELECT settlement_id, code FROM ledger_transfers WHERE settlement_id LIKE 'pi\\_' || $1 || '\\_%'
"""


async def read_database(database_url: str, run: str, observed: Observed) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        for r in await conn.fetch(_ROWS, run):
            observed.rows[(r["provider"], r["event_id"])] = bool(r["published"])
        for r in await conn.fetch(_DLQ, run):
            letter = DeadLetter(r["stage"], r["error_class"], r["error_message"])
            observed.open_dlq.setdefault((r["provider"], r["event_id"]), []).append(letter)
        for r in await conn.fetch(_TRANSFERS, run):
            observed.transfers[(r["settlement_id"], int(r["code"]))] += 1
    finally:
        await conn.close()


async def read_ordering(database_url: str, observed: Observed) -> None:
    """The ordering property and what it was checked over. Runs after the drain, so a
    deferral still open is a violation unless its event is parked."""
    conn = await asyncpg.connect(database_url)
    try:
        observed.order_violations = await violations(conn)
        observed.ordering = await summary(conn)
    finally:
        await conn.close()


async def read_stream(nats_url: str, stream: str, run: str) -> Counter[Key]:
    """How many messages the stream holds per event of the run (an ephemeral consumer)."""
    return Counter(key for key, _ in await stream_messages(nats_url, stream, run))


async def stream_messages(nats_url: str, stream: str, run: str) -> list[tuple[Key, float]]:
    """Every message of the run on the stream: its event, and when JetStream stored it
    (epoch seconds)."""
    found: list[tuple[Key, float]] = []
    nc = await nats.connect(nats_url, connect_timeout=5, max_reconnect_attempts=3)
    try:
        js = nc.jetstream(timeout=10)
        info = await js.stream_info(stream)
        expected = info.state.messages
        config = ConsumerConfig(
            ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL, inactive_threshold=30.0
        )
        sub = await js.pull_subscribe(">", stream=stream, config=config)
        seen = 0
        # A replicated consumer made just after a node restarted may have no leader yet:
        # its fetches get "no responders" (503) until one is elected, within seconds.
        leaderless_until = time.monotonic() + LEADERLESS_WAIT_S
        while seen < expected:
            try:
                batch = await sub.fetch(1000, timeout=3)
            except (nats.errors.TimeoutError, TimeoutError):
                break  # messages removed since stream_info: what we have is all there is
            except nats.js.errors.ServiceUnavailableError:
                if time.monotonic() > leaderless_until:
                    raise
                await asyncio.sleep(0.5)
                continue
            for msg in batch:
                seen += 1
                headers = msg.headers or {}
                event_id = headers.get("Gateway-Event-Id", "")
                if f"_{run}_" in event_id:
                    key = (headers.get("Gateway-Provider", ""), event_id)
                    found.append((key, msg.metadata.timestamp.timestamp()))
        await sub.unsubscribe()
    finally:
        await nc.close()
    return found


def ledger_check(config_path: Path, database_url: str) -> tuple[bool, str]:
    """Run `gateway ledger check` against `database_url` (bypassing any proxy)."""
    env = clean_env(GATEWAY_DATABASE_URL=database_url)
    done = subprocess.run(
        [GATEWAY, "--log-level", "ERROR", "ledger", "--config", str(config_path), "check"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    lines = (done.stdout.strip() or done.stderr.strip()).splitlines()
    return done.returncode == 0, lines[-1] if lines else ""


async def observe(
    *,
    run: str,
    database_url: str,
    nats_url: str | None,
    config_path: Path,
    stream: str = "WEBHOOKS",
) -> Observed:
    """Read everything the audit judges."""
    observed = Observed()
    await read_database(database_url, run, observed)
    await read_ordering(database_url, observed)
    if nats_url:
        observed.stream = await read_stream(nats_url, stream, run)
    observed.ledger_ok, observed.ledger_text = ledger_check(config_path, database_url)
    return observed
