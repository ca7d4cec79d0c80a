"""The console and `gateway dlq list` choose the same rows: for 50 random filter sets
(seeded, over states, stages, providers, error classes, types, text search, attempts
and time windows), the ids the console's API lists, following `next_cursor` to the
end, are the ids `gateway dlq list --json` prints, in the same order, on one database.

The CLI runs through its own entry point (`gateway.cli.main`) in this process, with
stdout captured; it reads the same configuration file an operator would pass.
"""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from gateway import cli
from gateway.core.console.roles import Role
from tests.support.console import ConsoleHarness
from tests.support.dead_letters import park

T0 = datetime(2026, 11, 20, tzinfo=UTC)
STAGES = ["ingest", "publish", "settlement"]
PROVIDERS = ["stripe", "github", "shopify", "paddle"]
CLASSES = ["UNKNOWN_MERCHANT", "EVENT_TYPE_MISSING", "LEDGER_UNAVAILABLE", "PAYLOAD_TOO_LARGE"]
TYPES = ["payment_intent.succeeded", "payment_intent.failed", "charge.refunded", "push", None]
TYPE_PATTERNS = ["payment_intent.*", "charge.refunded", "push", "payment_*", "charge.*", "nothing"]
SEARCHES = ["evt_1", "EVT_2", "100%", "a_b", "merchant", "ACCT", "no such", "_", "%"]


async def seed(console: ConsoleHarness, rand: random.Random) -> int:
    rows = 240
    async with console.pool.acquire() as conn:
        for n in range(rows):
            # Some ids carry LIKE's metacharacters, so a search for them must be literal.
            event_id = rand.choice([f"evt_{n}", f"evt_{n}_100%", f"a_b{n}", f"aXb{n}"])
            await park(
                conn,
                event_id,
                stage=rand.choice(STAGES),
                provider=rand.choice(PROVIDERS),
                event_type=rand.choice(TYPES),
                error_class=rand.choice(CLASSES),
                error_message=rand.choice(
                    [f"no ledger account for merchant acct_{n}", "timed out", "Merchant missing"]
                ),
                attempts=rand.randint(1, 6),
                # A few rows share a failure time, as rows parked in one transaction do.
                first_failed_at=T0 + timedelta(minutes=rand.randint(0, 60 * 24 * 5) // 7 * 7),
                resolved=rand.random() < 0.25,
                with_event=rand.random() > 0.1,
            )
    return rows


def random_filter(rand: random.Random) -> list[tuple[str, str]]:
    """A filter as (query key, value) pairs; the CLI's flags are made from the same."""
    pairs: list[tuple[str, str]] = [("state", rand.choice(["open", "resolved", "any"]))]
    for key, pool in (("stage", STAGES), ("provider", PROVIDERS), ("error_class", CLASSES)):
        if rand.random() < 0.4:
            chosen = rand.sample(pool, rand.randint(1, 2))
            if key == "error_class":
                chosen = [c.lower() if rand.random() < 0.3 else c for c in chosen]
            pairs += [(key, v) for v in chosen]
    if rand.random() < 0.4:
        pairs += [("type", t) for t in rand.sample(TYPE_PATTERNS, rand.randint(1, 2))]
    if rand.random() < 0.35:
        pairs.append(("search", rand.choice(SEARCHES)))
    if rand.random() < 0.3:
        pairs.append(("min_attempts", str(rand.randint(1, 6))))
    if rand.random() < 0.4:
        start = T0 + timedelta(hours=rand.randint(0, 100))
        pairs.append(("since", start.isoformat().replace("+00:00", "Z")))
        if rand.random() < 0.5:
            end = start + timedelta(hours=rand.randint(1, 48))
            pairs.append(("until", end.isoformat().replace("+00:00", "Z")))
    return pairs


def cli_args(pairs: list[tuple[str, str]]) -> list[str]:
    args: list[str] = []
    for key, value in pairs:
        if key == "state":
            args.append({"open": "--unresolved", "resolved": "--resolved", "any": "--any"}[value])
        else:
            args += [f"--{key.replace('_', '-')}", value]
    return args


async def cli_ids(capsys: pytest.CaptureFixture[str], cfg: str, args: list[str]) -> list[int]:
    argv = ["dlq", "list", "--json", "--limit", "100000", "--config", cfg, *args]
    status = await asyncio.to_thread(cli.main, argv)
    captured = capsys.readouterr()
    assert status == 0, (argv, captured.err)
    return [row["id"] for row in orjson.loads(captured.out)]


async def console_ids(console: ConsoleHarness, pairs: list[tuple[str, str]]) -> list[int]:
    # An investigator reads every message, as the CLI does: a viewer's `search` leaves
    # out the messages it may not read (tests/integration/console/test_viewer_markers.py).
    api = console.client(Role.INVESTIGATOR)
    ids: list[int] = []
    cursor: str | None = None
    while True:
        params: list[tuple[str, Any]] = [*pairs, ("limit", "17")]
        if cursor:
            params.append(("cursor", cursor))
        r = await api.get("/console/api/v1/dlq", params=params)
        assert r.status_code == 200, (pairs, r.text)
        doc = r.json()
        ids += [item["id"] for item in doc["items"]]
        cursor = doc["next_cursor"]
        if cursor is None:
            return ids


async def test_fifty_random_filters_choose_the_same_rows(
    console: ConsoleHarness, cfg: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rand = random.Random(20261201)
    await seed(console, rand)
    nonempty = 0
    for _ in range(50):
        pairs = random_filter(rand)
        from_cli = await cli_ids(capsys, cfg, cli_args(pairs))
        from_console = await console_ids(console, pairs)
        assert from_console == from_cli, pairs
        nonempty += bool(from_cli)
    # The filters are not all so narrow that both sides agree on nothing.
    assert nonempty >= 25


async def test_a_bad_filter_is_the_same_line_in_both(
    console: ConsoleHarness, cfg: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["dlq", "list", "--type", "in*voice", "--config", cfg]
    status = await asyncio.to_thread(cli.main, argv)
    err = capsys.readouterr().err
    assert status == 2
    r = await console.client(Role.VIEWER).get("/console/api/v1/dlq", params={"type": "in*voice"})
    assert r.status_code == 400
    assert r.json()["detail"] in err
