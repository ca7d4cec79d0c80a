"""The event log's and the audit trail's pages at scale: 200,000 events over 40 days
and 100,000 audit rows. The plans of the first page, of a page deep behind a cursor, and
of the filtered pages use an index (EXPLAIN: never a Seq Scan of the table)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import orjson
import pytest
import pytest_asyncio

from gateway.adapters.postgres.console import events as console_events
from gateway.adapters.postgres.console.audit_reads import audit_page, page_sql
from gateway.adapters.postgres.console.events import search_events, search_sql
from gateway.core.console.audit_search import parse_audit_search
from gateway.core.events.search import parse_event_search
from gateway.errors import EventsUsageError
from tests.support.services import create_database, drop_database, unique_name

EVENTS = 200_000
AUDIT_ROWS = 100_000
T0 = datetime(2026, 10, 1, tzinfo=UTC)
NOW = T0 + timedelta(days=40)

# Four providers, a type per row, a JSON body, one row in 1,000 with a body that is not
# JSON; one event every 17.28 s over 40 days, bursts of four sharing a second.
_SEED_EVENTS = """
INSERT INTO processed_webhooks (provider, event_id, event_type, subject, headers, body,
                                received_at, source)
SELECT (ARRAY['stripe', 'github', 'shopify', 'paddle'])[1 + i % 4],
       'evt_' || i,
       (ARRAY['invoice.paid', 'charge.succeeded', 'push'])[1 + i % 3],
       'webhooks.x.' || i % 3,
       '{}'::jsonb,
       CASE WHEN i % 1000 = 0 THEN '\\xff00'::bytea
            ELSE convert_to('{"id": "evt_' || i || '", "n": ' || i % 50 || '}', 'UTF8') END,
       $1::timestamptz + make_interval(secs => (i / 4) * 69.12),
       CASE WHEN i % 10 = 0 THEN 'backfill' ELSE 'live' END
FROM generate_series(1, $2) AS i
"""
_SEED_AUDIT = """
INSERT INTO console_audit (at, actor, role, via, action, target, outcome)
SELECT $1::timestamptz + make_interval(secs => i * 30),
       'console:' || (ARRAY['alice', 'bob', 'carol'])[1 + i % 3], 'operator', 'bearer',
       (ARRAY['dlq.resolve', 'payload.view', 'login', 'key.release'])[1 + i % 4],
       'dlq:' || i, CASE WHEN i % 50 = 0 THEN 'refused' ELSE 'ok' END
FROM generate_series(1, $2) AS i
"""


# One seeded database for the whole module (seeding takes most of its time).
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def big(template_db: str) -> AsyncIterator[asyncpg.Connection]:
    name = unique_name("gw_events_big")
    conn = await asyncpg.connect(await create_database(name, template=template_db))
    await conn.execute(_SEED_EVENTS, T0, EVENTS)
    # The relay has published everything so far; the next rows are owed.
    await conn.execute(
        "UPDATE outbox_cursor SET done_snapshot = pg_current_snapshot(),"
        " target_snapshot = pg_current_snapshot()"
    )
    await conn.execute(
        "INSERT INTO processed_webhooks (provider, event_id, event_type, subject, body,"
        " received_at) SELECT 'stripe', 'owed_' || i, 'invoice.paid', 'webhooks.x', '{}',"
        " $1::timestamptz - make_interval(mins => i) FROM generate_series(1, 20) AS i",
        NOW,
    )
    await conn.execute(
        "UPDATE processed_webhooks SET publish_parked_at = received_at"
        " WHERE id % 5000 = 7 AND event_id LIKE 'evt_%'"
    )
    await conn.execute(
        "UPDATE processed_webhooks SET subject = NULL"
        " WHERE id % 5000 = 11 AND event_id LIKE 'evt_%'"
    )
    await conn.execute(_SEED_AUDIT, T0, AUDIT_ROWS)
    await conn.execute("ANALYZE processed_webhooks")
    await conn.execute("ANALYZE console_audit")
    yield conn
    await conn.close()
    await drop_database(name)


async def plan(conn: asyncpg.Connection, sql: str, args: list[Any]) -> str:
    doc = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *args)
    return orjson.dumps(orjson.loads(doc)).decode()


def scans(plan_json: str) -> list[tuple[str, str]]:
    """(node type, relation) of every scan node in a JSON plan."""
    found: list[tuple[str, str]] = []

    def walk(node: dict[str, Any]) -> None:
        if "Relation Name" in node:
            found.append((node["Node Type"], node["Relation Name"]))
        for child in node.get("Plans", []):
            walk(child)

    for top in orjson.loads(plan_json):
        walk(top["Plan"])
    return found


def search(**params: str) -> Any:
    return parse_event_search({k: [v] for k, v in params.items()}, NOW)


@pytest.mark.parametrize(
    "params",
    [
        {},  # the default: the last 24 h
        {"since": "31d"},
        {"provider": "github", "since": "31d"},
        {"type": "invoice.*", "source": "backfill", "since": "7d"},
        {"state": "waiting", "since": "31d"},
        {"state": "published", "since": "31d"},
        {"state": "parked", "since": "31d"},
        {"state": "no subject", "since": "31d"},
        {"contains": '{"n": 7}', "since": "31d"},
        {"event_id": "evt_199996", "provider": "stripe", "since": "31d"},
        {"event_id": "evt_199996", "since": "31d"},
    ],
    ids=["default", "month", "provider", "type-source", "waiting", "published", "parked",
         "no-subject", "contains",
         "event-id", "event-id-alone"],
)  # fmt: skip
async def test_event_pages_use_an_index(big: asyncpg.Connection, params: dict[str, str]) -> None:
    """The first page and one 100 pages deep (behind a cursor) of each filter."""
    s = search(**params, limit="50")
    first = scans(await plan(big, *search_sql(s)))
    rows, after = await search_events(big, s)
    assert rows, params
    pages = 1
    while after is not None and pages < 100:
        deep = replace(s, after=after)
        rows, after = await search_events(big, deep)
        pages += 1
    deep_plan = scans(await plan(big, *search_sql(deep if pages > 1 else s)))
    for found in (first, deep_plan):
        tables = [rel for _, rel in found]
        assert "processed_webhooks" in tables
        assert ("Seq Scan", "processed_webhooks") not in found, (params, found)


def indexes(plan_json: str) -> set[str]:
    found: set[str] = set()

    def walk(node: dict[str, Any]) -> None:
        if "Index Name" in node:
            found.add(node["Index Name"])
        for child in node.get("Plans", []):
            walk(child)

    for top in orjson.loads(plan_json):
        walk(top["Plan"])
    return found


@pytest.mark.parametrize(
    ("state", "index"),
    [
        ("parked", "processed_webhooks_parked_received_idx"),
        ("no subject", "processed_webhooks_no_subject_received_idx"),
        ("waiting", "processed_webhooks_outbox_xid_idx"),
        (None, "processed_webhooks_received_idx"),
    ],
)
async def test_rare_states_read_their_own_index(
    big: asyncpg.Connection, state: str | None, index: str
) -> None:
    """A rare state is read from the index that holds only its rows, not by filtering
    every event of the window; and the rows found are the ones in that state."""
    s = search(**({"state": state} if state else {}), since="31d", limit="200")
    assert index in indexes(await plan(big, *search_sql(s)))
    rows, _ = await search_events(big, s)
    assert rows
    if state is not None:
        assert {r.publish_state for r in rows} == {state}


async def test_waiting_finds_the_owed_rows(big: asyncpg.Connection) -> None:
    rows, after = await search_events(big, search(state="waiting", since="31d", limit="50"))
    assert sorted(r.event_id for r in rows) == sorted(f"owed_{i}" for i in range(1, 21))
    assert after is None


async def test_containment_passes_over_bodies_that_are_not_json(big: asyncpg.Connection) -> None:
    """Rows with a body that is not JSON lie in the window; the search answers."""
    rows, _ = await search_events(big, search(contains='{"n": 0}', since="3d", limit="200"))
    assert rows and all(r.event_id.startswith("evt_") for r in rows)
    assert all(int(r.event_id[4:]) % 50 == 0 and int(r.event_id[4:]) % 1000 for r in rows)


@pytest.mark.parametrize(
    "params",
    [{}, {"since": "31d"}, {"actor": "console:bob", "since": "31d"},
     {"action": "dlq.*", "outcome": "refused", "since": "31d"}, {"target": "dlq:77777"}],
    ids=["default", "month", "actor", "action-outcome", "target"],
)  # fmt: skip
async def test_audit_pages_use_an_index(big: asyncpg.Connection, params: dict[str, str]) -> None:
    s = parse_audit_search({k: [v] for k, v in params.items()}, NOW)
    found = scans(await plan(big, *page_sql(s)))
    assert ("Seq Scan", "console_audit") not in found, (params, found)
    _, after = await audit_page(big, s)
    if after is not None:
        deep = scans(await plan(big, *page_sql(replace(s, after=after))))
        assert ("Seq Scan", "console_audit") not in deep, (params, deep)


async def test_a_containment_search_too_slow_is_refused(
    big: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A document that matches nothing reads the whole window; past the bound the search
    is refused with what to do, and the connection is usable after (the bound was local
    to the search's transaction)."""
    monkeypatch.setattr(console_events, "CONTAINS_TIMEOUT_S", 0.01)
    with pytest.raises(EventsUsageError, match="narrow the window"):
        await search_events(big, search(contains='{"n": 999}', since="31d"))
    assert await big.fetchval("SHOW statement_timeout") == "0"
    rows, _ = await search_events(big, search(since="31d", limit="5"))
    assert len(rows) == 5
