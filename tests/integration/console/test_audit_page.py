"""The console's audit page against a real PostgreSQL: filters (actor, action, target,
outcome, window), keyset pages newest first, hostile detail escaped, and the NDJSON
export for admins, bounded by its window and audited itself."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest

from gateway.core.console.roles import Role
from tests.support.console import ConsoleHarness

HOSTILE = "<script>alert(1)</script>"


async def seed(console: ConsoleHarness) -> datetime:
    """Eight rows over ten days, written as the console writes them; returns now."""
    now = datetime.now(UTC)
    rows = [
        (now - timedelta(days=10), "console:alice", "dlq.resolve", "dlq:1", "ok", {}),
        (now - timedelta(days=2), "console:alice", "dlq.resolve", "dlq:2", "ok", {"note": "n"}),
        (now - timedelta(days=1), "console:bob", "job.create", "job:7", "ok", {}),
        (now - timedelta(hours=5), "console:bob", "key.release", "key:stripe/pi_A", "ok", {}),
        (now - timedelta(hours=4), "10.0.0.9", "login.failed", None, "refused", {}),
        (now - timedelta(hours=3), "console:carol", "forbidden", "POST /x", "refused", {}),
        (now - timedelta(hours=2), "console:alice", "payload.view", "dlq:2", "ok",
         {"why": HOSTILE}),
        (now - timedelta(hours=1), "console:alice", "dlq.resolve", "dlq:3", "failed", {}),
    ]  # fmt: skip
    async with console.pool.acquire() as conn:
        await conn.executemany(
            "INSERT INTO console_audit (at, actor, role, via, address, action, target,"
            " outcome, detail) VALUES ($1, $2, 'operator', 'bearer', '127.0.0.1', $3, $4,"
            " $5, $6::jsonb)",
            [(at, a, act, t, o, orjson.dumps(d).decode()) for at, a, act, t, o, d in rows],
        )
    return now


async def targets(console: ConsoleHarness, **params: str) -> list[str | None]:
    r = await console.client(Role.VIEWER).get("/console/api/v1/audit", params=params)
    assert r.status_code == 200, r.text
    return [item["target"] for item in r.json()["items"] if item["actor"] != "console:viewer"]


async def test_filters_and_the_default_week(console: ConsoleHarness) -> None:
    await seed(console)
    assert await targets(console) == [
        "dlq:3", "dlq:2", "POST /x", None, "key:stripe/pi_A", "job:7", "dlq:2",
    ]  # fmt: skip
    assert await targets(console, since="30d", action="dlq.resolve") == ["dlq:3", "dlq:2", "dlq:1"]
    assert await targets(console, action="dlq.*") == ["dlq:3", "dlq:2"]
    assert await targets(console, actor="console:bob") == ["key:stripe/pi_A", "job:7"]
    assert await targets(console, target="dlq:2") == ["dlq:2", "dlq:2"]
    assert await targets(console, target="key:*") == ["key:stripe/pi_A"]
    assert await targets(console, outcome="refused") == ["POST /x", None]
    assert await targets(console, since="6h", until="150m") == ["POST /x", None, "key:stripe/pi_A"]
    assert await targets(console, action="dlq_*") == []  # `_` is literal, not a wildcard


@pytest.mark.parametrize(
    ("params", "detail"),
    [
        ({"since": "40d"}, "search at most 31 days"),
        ({"outcome": "maybe"}, "outcome: 'maybe' is not one of ok, refused, failed"),
        ({"since": "nonsense"}, "since: cannot read 'nonsense'"),
        ({"cursor": "xyz"}, "cursor: not a page cursor"),
    ],
)
async def test_refused_filters(
    console: ConsoleHarness, params: dict[str, str], detail: str
) -> None:
    r = await console.client(Role.VIEWER).get("/console/api/v1/audit", params=params)
    assert r.status_code == 400 and detail in r.json()["detail"]
    page = await console.client(Role.VIEWER).get("/console/audit", params=params)
    assert page.status_code == 400 and detail.split("'")[0] in page.text


async def test_pages_walk_every_row_once(console: ConsoleHarness) -> None:
    await seed(console)
    client = console.client(Role.VIEWER)
    params = {"limit": "3", "since": "30d", "actor": "console:alice"}
    seen: list[str] = []
    while True:
        body = (await client.get("/console/api/v1/audit", params=params)).json()
        seen += [item["target"] for item in body["items"]]
        if body["next_cursor"] is None:
            break
        params["cursor"] = body["next_cursor"]
    assert seen == ["dlq:3", "dlq:2", "dlq:2", "dlq:1"]


async def test_the_page_escapes_and_links_the_export_for_admins(console: ConsoleHarness) -> None:
    await seed(console)
    viewer = await console.client(Role.VIEWER).get("/console/audit", params={"limit": "2"})
    assert viewer.status_code == 200
    assert HOSTILE not in viewer.text and "alert(1)" in viewer.text
    assert 'rel="next"' in viewer.text
    assert "export.ndjson" not in viewer.text
    admin = await console.client(Role.ADMIN).get("/console/audit")
    assert "/console/audit/export.ndjson?" in admin.text


async def test_the_export_streams_the_window_and_is_audited(console: ConsoleHarness) -> None:
    await seed(console)
    r = await console.client(Role.ADMIN).get(
        "/console/audit/export.ndjson", params={"since": "3d", "action": "dlq.*"}
    )
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/x-ndjson")
    assert r.headers["content-disposition"].startswith("attachment;")
    lines = [orjson.loads(line) for line in r.text.splitlines()]
    assert [(x["action"], x["target"]) for x in lines] == [
        ("dlq.resolve", "dlq:2"),
        ("dlq.resolve", "dlq:3"),
    ]
    (export,) = await console.audit("audit.export")
    assert export["actor"] == "console:admin" and export["outcome"] == "ok"
    assert orjson.loads(export["detail"])["action"] == "dlq.*"
    wide = await console.client(Role.ADMIN).get(
        "/console/audit/export.ndjson", params={"since": "90d"}
    )
    assert wide.status_code == 400 and "at most 31 days" in wide.json()["detail"]
    assert len(await console.audit("audit.export")) == 1
