"""The dead-letter list's pages at scale: 200,000 rows, the plans of the first page and
of a page deep behind a cursor use an index (EXPLAIN, never a Seq Scan on dlq_webhooks),
and paging to the end visits every matching row once, in the CLI's order."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import orjson
import pytest

from gateway.adapters.postgres.dead_letters.pages import count_query, list_page, page_query
from gateway.core.dlq.filters import DlqFilter, build_filter
from gateway.core.keyset import Keyset
from gateway.errors import DlqUsageError

ROWS = 200_000
T0 = datetime(2026, 11, 1, tzinfo=UTC)

# Every 7th row resolved, stages and providers spread, many rows sharing a failure time
# (a burst parks a second's worth at once) so the id tie-break matters.
_SEED = """
INSERT INTO dlq_webhooks (stage, provider, event_id, error_class, error_message, payload,
                          attempts, received_at, first_failed_at, last_failed_at,
                          is_resolved, resolved_at, resolution)
SELECT (ARRAY['ingest', 'publish', 'settlement'])[1 + i % 3],
       (ARRAY['stripe', 'github', 'shopify', 'paddle'])[1 + i % 4],
       'evt_' || i,
       (ARRAY['UNKNOWN_MERCHANT', 'EVENT_TYPE_MISSING', 'LEDGER_UNAVAILABLE'])[1 + i % 3],
       'failure number ' || i,
       '{"id": 1}'::bytea,
       1 + i % 6,
       $1::timestamptz + make_interval(secs => i / 4),
       $1::timestamptz + make_interval(secs => i / 4),
       $1::timestamptz + make_interval(secs => i / 4),
       i % 7 = 0,
       CASE WHEN i % 7 = 0 THEN now() END,
       CASE WHEN i % 7 = 0 THEN 'manual' END
FROM generate_series(1, $2) AS i
"""


@pytest.fixture
async def big(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    await conn.execute(_SEED, T0, ROWS)
    await conn.execute("ANALYZE dlq_webhooks")
    yield conn
    await conn.close()


async def plan(conn: asyncpg.Connection, query: list[object]) -> str:
    sql, *args = query
    doc = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *args)
    return orjson.dumps(orjson.loads(doc)).decode()


def scans(plan_json: str) -> list[tuple[str, str]]:
    """(node type, relation) of every scan node in a JSON plan."""
    found: list[tuple[str, str]] = []

    def walk(node: dict[str, object]) -> None:
        if "Relation Name" in node:
            found.append((str(node["Node Type"]), str(node["Relation Name"])))
        for child in node.get("Plans", []) or []:  # type: ignore[attr-defined]
            walk(child)

    walk(orjson.loads(plan_json)[0]["Plan"])
    return found


async def test_first_and_deep_pages_use_an_index(big: asyncpg.Connection) -> None:
    """The default filter (open rows) and `--any` page by index, at the start and deep
    behind a cursor; neither reads the table from its start."""
    deep = Keyset(T0 + timedelta(seconds=ROWS // 4 - 100), ROWS - 400)
    for f in (DlqFilter(), DlqFilter(resolved=None), build_filter(T0, stages=["settlement"])):
        for after in (None, deep):
            nodes = scans(await plan(big, page_query(f, after, 50)))
            on_table = [n for n in nodes if n[1] == "dlq_webhooks"]
            assert on_table, nodes
            assert all(kind != "Seq Scan" for kind, _ in on_table), (f, after, nodes)
    # The capped count never counts past the cap, whatever the plan.
    assert await big.fetchval(*count_query(DlqFilter())) == 10_001


async def test_a_search_that_reads_too_long_is_refused(big: asyncpg.Connection) -> None:
    """A console page's reads are bounded: a text search over every row (no index holds
    the messages) past the bound is a one-line refusal asking for a narrower filter, and
    the connection goes back without the bound."""
    f = build_filter(T0, search="matches nothing at all")
    with pytest.raises(DlqUsageError, match=r"the filter read for more than 0\.001 s: narrow it"):
        await list_page(big, f, None, 50, timeout_s=0.001)
    assert await big.fetchval("SHOW statement_timeout") == "0"
    page = await list_page(big, DlqFilter(), None, 50, timeout_s=5)
    assert len(page.rows) == 50 and page.capped


async def test_a_page_inside_a_burst_starts_at_its_row(database_url: str) -> None:
    """Rows parked in one transaction share their failure time: a page deep inside such
    a group is read through an index on (first_failed_at, id), starting at its row,
    not by sorting the whole group again (sql/016_console_lists.sql)."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(_SEED.replace("secs => i / 4", "secs => i / 50000"), T0, ROWS)
        await conn.execute("ANALYZE dlq_webhooks")
        deep = Keyset(T0 + timedelta(seconds=2), 125_000)
        for f, index in (
            (DlqFilter(), "dlq_webhooks_open_page_idx"),
            (DlqFilter(resolved=None), "dlq_webhooks_page_idx"),
        ):
            sql, *args = page_query(f, deep, 50)
            doc = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", *args)
            assert f'"Index Name":"{index}"' in orjson.dumps(orjson.loads(doc)).decode()
            table_rows = [
                line[0]
                for line in await conn.fetch(f"EXPLAIN ANALYZE {sql}", *args)
                if "on dlq_webhooks" in line[0]
            ]
            # The scan reads the page and the one row more, not the group of 50,000.
            assert table_rows and "rows=51 " in table_rows[0], table_rows
    finally:
        await conn.close()


async def test_paging_to_the_end_visits_every_row_once_in_order(
    database_url: str,
) -> None:
    """Rows sharing a failure time are split across pages by id, none lost or repeated."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(_SEED, T0, 1_000)
        f = build_filter(T0, providers=["stripe", "github"], resolved=False)
        expected = [
            r["id"]
            for r in await conn.fetch(
                "SELECT id FROM dlq_webhooks WHERE NOT is_resolved AND provider IN"
                " ('stripe', 'github') ORDER BY first_failed_at, id"
            )
        ]
        seen: list[int] = []
        after = None
        pages = 0
        while True:
            page = await list_page(conn, f, after, 37)
            pages += 1
            assert page.total == len(expected) and not page.capped
            seen += [r.id for r in page.rows]
            if page.next_after is None:
                break
            after = page.next_after
        assert seen == expected
        assert pages == -(-len(expected) // 37)
    finally:
        await conn.close()
