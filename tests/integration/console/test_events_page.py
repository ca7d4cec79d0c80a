"""The console's event log against a real PostgreSQL: the filters of `gateway events
list` inside a required window, the publish state, JSON containment (a body that is
not JSON, or not UTF-8, never breaks it), keyset pages, and one event's page with its
publish, settlement and ordering state, its dead letters, and its payload escaped and
audited for investigators only."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import orjson
import pytest

from gateway.adapters.postgres import Conn
from gateway.adapters.postgres.console.events import search_events
from gateway.adapters.postgres.webhooks import insert_events
from gateway.core.console.roles import Role
from gateway.core.events.model import Event, Failure, Source
from gateway.core.events.search import parse_event_search
from gateway.core.providers.internal import instruction as from_internal
from gateway.core.settlement.instructions import transfer_id
from gateway.errors import ErrorClass
from tests.support.console import ConsoleHarness

HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'
CAPTURED = {
    "id": "pay-1",
    "type": "payment.captured",
    "data": {
        "settlement_id": "s_1",
        "merchant_id": "m_1",
        "amount_minor": 1250,
        "currency": "EUR",
    },
}


def _event(provider: str, event_id: str, event_type: str | None, body: bytes, at: datetime,
           **kw: object) -> Event:  # fmt: skip
    subject = None if event_type is None else f"webhooks.{provider}.{event_type}"
    headers = kw.pop("headers", {"content-type": "application/json"})
    return Event(provider, event_id, event_type, subject, headers, body, at, **kw)  # type: ignore[arg-type]


async def seed(console: ConsoleHarness) -> dict[str, int]:
    """Seven events over 40 days; returns row ids by event id.

    evt_a  stripe invoice.paid, hostile JSON body, signed headers, published
    evt_b  stripe invoice.payment_failed, 2 days ago, waiting in the outbox
    gh-1   github push, backfill, published
    evt_bin stripe, a body that is not UTF-8 (no subject: parked at ingest)
    evt_txt stripe, text that is not JSON, parked by the relay, with a publish dead letter
    pay-1  service:billing payment.captured, keyed, settled, with a settlement dead letter
    evt_old stripe invoice.paid, 40 days ago, payload removed
    """
    now = datetime.now(UTC)
    hostile = orjson.dumps({"id": "evt_a", "type": "invoice.paid", "note": HOSTILE})
    events = [
        _event("stripe", "evt_a", "invoice.paid", hostile, now - timedelta(minutes=5),
               headers={"content-type": "application/json", "stripe-signature": "t=1,v1=abc"}),
        _event("stripe", "evt_b", "invoice.payment_failed", b'{"id": "evt_b"}',
               now - timedelta(days=2)),
        _event("github", "gh-1", "push", b'{"ref": "refs/heads/main"}',
               now - timedelta(minutes=30), source=Source.BACKFILL),
        _event("stripe", "evt_bin", None, b"\xff\xfe\x00binary", now - timedelta(minutes=20),
               failure=Failure(ErrorClass.PAYLOAD_NOT_JSON, "not JSON")),
        _event("stripe", "evt_txt", "invoice.paid", b"plain text, not {json}",
               now - timedelta(minutes=15)),
        _event("service:billing", "pay-1", "payment.captured", orjson.dumps(CAPTURED),
               now - timedelta(minutes=10)),
        _event("stripe", "evt_old", "invoice.paid", b"{}", now - timedelta(days=40)),
    ]  # fmt: skip
    async with console.pool.acquire() as conn:
        ids = {e: i for (_, e), i in (await insert_events(conn, events)).items()}
        await _states(conn, ids)
    return ids


async def _states(conn: Conn, ids: dict[str, int]) -> None:
    published = [ids["evt_a"], ids["gh-1"], ids["pay-1"], ids["evt_old"]]
    # Rows from before the outbox cursor count as published by `published_at`.
    await conn.execute(
        "UPDATE processed_webhooks SET outbox_xid = NULL, published_at = now()"
        " WHERE id = ANY($1::bigint[])",
        published,
    )
    await conn.execute(
        "UPDATE processed_webhooks SET publish_parked_at = now(), publish_attempts = 3"
        " WHERE id = $1",
        ids["evt_txt"],
    )
    await conn.execute(
        "UPDATE processed_webhooks SET body = '', headers = '{}', payload_removed_at = now()"
        " WHERE id = $1",
        ids["evt_old"],
    )
    await conn.execute(
        "UPDATE processed_webhooks SET order_key = 's_1', key_seq = 1 WHERE id = $1",
        ids["pay-1"],
    )
    await conn.execute(
        "INSERT INTO order_counters (provider, order_key, last_seq)"
        " VALUES ('service:billing', 's_1', 1)"
    )
    await conn.execute(
        "INSERT INTO order_applied (provider, order_key, applied_seq)"
        " VALUES ('service:billing', 's_1', 1)"
    )
    await conn.execute(
        "INSERT INTO order_log (provider, order_key, key_seq, outcome, event_id)"
        " VALUES ('service:billing', 's_1', 1, 'applied', 'pay-1')"
    )
    instruction = from_internal("payment.captured", CAPTURED)
    assert instruction is not None
    await conn.execute(
        "INSERT INTO settlements (transfer_id, kind, settlement_id, provider, merchant_id,"
        " source_event_id, state, amount_minor, currency, attempts)"
        " VALUES ($1, 'capture', 's_1', 'service:billing', 'm_1', 'pay-1', 'settled', 1250,"
        " 'EUR', 2)",
        transfer_id(instruction),
    )
    for event_id, stage, error_class, resolved in [
        ("evt_txt", "publish", "PUBLISH_FAILED", False),
        ("pay-1", "settlement", "LEDGER_UNAVAILABLE", True),
    ]:
        await conn.execute(
            "INSERT INTO dlq_webhooks (webhook_id, stage, provider, event_id, error_class,"
            " error_message, payload, is_resolved, resolution)"
            " SELECT id, $2, provider, event_id, $3, 'it failed', body, $4,"
            " CASE WHEN $4 THEN 'replayed' END FROM processed_webhooks WHERE event_id = $1",
            event_id,
            stage,
            error_class,
            resolved,
        )


async def listed(console: ConsoleHarness, role: Role = Role.VIEWER, **params: object) -> list[str]:
    r = await console.client(role).get("/console/api/v1/events", params=params)  # type: ignore[arg-type]
    assert r.status_code == 200, r.text
    return sorted(item["event_id"] for item in r.json()["items"])


async def test_filters_narrow_the_list(console: ConsoleHarness) -> None:
    """Each filter narrows the default window (the last 24 h) as `gateway events list`
    would; older rows need a wider window."""
    ids = await seed(console)
    day = ["evt_a", "evt_bin", "evt_txt", "gh-1", "pay-1"]
    assert await listed(console) == day
    assert await listed(console, since="3d") == sorted([*day, "evt_b"])
    assert await listed(console, provider="github") == ["gh-1"]
    assert await listed(console, type="invoice.*") == ["evt_a", "evt_txt"]
    assert await listed(console, source="backfill") == ["gh-1"]
    assert await listed(console, event_id="pay-1") == ["pay-1"]
    assert await listed(console, id=str(ids["evt_a"])) == ["evt_a"]
    assert await listed(console, since="31d", until="25d") == []
    assert await listed(console, since="2026-01-01", until="2026-01-02") == []


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("published", ["evt_a", "gh-1", "pay-1"]),
        ("waiting", ["evt_b"]),
        ("parked", ["evt_txt"]),
        ("no subject", ["evt_bin"]),
    ],
)
async def test_publish_state(console: ConsoleHarness, state: str, expected: list[str]) -> None:
    await seed(console)
    assert await listed(console, state=state, since="3d") == expected


async def test_a_window_wider_than_31_days_is_refused(console: ConsoleHarness) -> None:
    await seed(console)
    r = await console.client(Role.VIEWER).get("/console/api/v1/events", params={"since": "40d"})
    assert r.status_code == 400
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "search at most 31 days" in r.json()["detail"]
    page = await console.client(Role.VIEWER).get("/console/events", params={"since": "40d"})
    assert page.status_code == 400
    assert "40.0 days wide; search at most 31 days" in page.text


async def test_containment_skips_bodies_that_are_not_json(console: ConsoleHarness) -> None:
    """`payload @> ...` over bodies that include invalid UTF-8, plain text and a removed
    body: only JSON bodies match, nothing fails; bad JSON is a clear 400."""
    await seed(console)
    role = Role.INVESTIGATOR
    found = await listed(console, role, contains='{"data": {"currency": "EUR"}}', since="31d")
    assert found == ["pay-1"]
    assert await listed(console, role, contains='{"type": "invoice.paid"}', since="31d") == [
        "evt_a"
    ]
    everything = await listed(console, role, contains="{}", since="31d")
    assert everything == ["evt_a", "evt_b", "gh-1", "pay-1"]
    assert await listed(console, role, contains='{"data": {"amount_minor": 1250.0}}') == ["pay-1"]
    for bad, detail in [
        ('{"type": ', "contains: not valid JSON"),
        ('{"type": "a\\u0000"}', "matches no stored payload"),
        ('"invoice.paid"', "give a JSON object or array"),
    ]:
        r = await console.client(role).get("/console/api/v1/events", params={"contains": bad})
        assert r.status_code == 400, bad
        assert detail in r.json()["detail"]


async def test_containment_in_a_parallel_plan(console: ConsoleHarness) -> None:
    """Containment under a planner told to use parallel query wherever it may: the
    console's search answers with its rows, and so does the same predicate sent as psql
    sends it (simple protocol), which PostgreSQL would run in parallel mode if
    body_as_jsonb allowed it; its EXCEPTION block may not run there (sql/020)."""
    await seed(console)
    search = parse_event_search({"contains": ['{"type": "invoice.paid"}'], "since": ["31d"]},
                                datetime.now(UTC))  # fmt: skip
    async with console.pool.acquire() as conn:
        for setting in ("force_parallel_mode = on", "parallel_setup_cost = 0",
                        "parallel_tuple_cost = 0", "min_parallel_table_scan_size = 0"):  # fmt: skip
            await conn.execute(f"SET {setting}")
        try:
            rows, _ = await search_events(conn, search)
            whole, _ = await search_events(conn, replace(search, contains="{}"))
            status = await conn.execute(
                "SELECT id FROM processed_webhooks"
                """ WHERE body_as_jsonb(body) @> '{"type": "invoice.paid"}'"""
            )
        finally:
            await conn.execute("RESET ALL")
    assert [r.event_id for r in rows] == ["evt_a"]
    assert sorted(r.event_id for r in whole) == ["evt_a", "evt_b", "gh-1", "pay-1"]
    assert status == "SELECT 1"  # one row found, not an error


async def test_a_viewer_may_not_search_payloads(console: ConsoleHarness) -> None:
    """Containment tells whether bodies hold a value: a viewer is refused (403, audited
    as forbidden) and its form has no such field; an investigator's search is audited
    with its filter."""
    await seed(console)
    viewer = console.client(Role.VIEWER)
    params = {"contains": '{"type": "invoice.paid"}'}
    api = await viewer.get("/console/api/v1/events", params=params)
    assert api.status_code == 403
    assert api.headers["content-type"].startswith("application/problem+json")
    page = await viewer.get("/console/events", params=params)
    assert page.status_code == 403 and "evt_a" not in page.text
    assert len(await console.audit("forbidden")) == 2
    assert await console.audit("events.search_payloads") == []
    form = await viewer.get("/console/events", params={"contains": ""})
    assert form.status_code == 200 and 'name="contains"' not in form.text
    investigator = console.client(Role.INVESTIGATOR)
    assert 'name="contains"' in (await investigator.get("/console/events")).text
    assert await console.audit("events.search_payloads") == []  # no containment, no row
    found = await investigator.get("/console/events", params=params)
    assert found.status_code == 200 and "evt_a" in found.text
    (row,) = await console.audit("events.search_payloads")
    assert (row["actor"], row["outcome"]) == ("console:investigator", "ok")
    detail = orjson.loads(row["detail"]) if isinstance(row["detail"], str) else row["detail"]
    assert detail["via"] == "page"
    assert detail["filter"]["contains"] == ['{"type": "invoice.paid"}']


async def test_pages_walk_every_row_once_newest_first(console: ConsoleHarness) -> None:
    await seed(console)
    client = console.client(Role.VIEWER)
    seen: list[str] = []
    params: dict[str, str] = {"limit": "2", "since": "31d"}
    pages = 0
    while True:
        body = (await client.get("/console/api/v1/events", params=params)).json()
        seen += [item["event_id"] for item in body["items"]]
        pages += 1
        if body["next_cursor"] is None:
            break
        params["cursor"] = body["next_cursor"]
    assert pages == 3  # evt_old, 40 days back, is outside every allowed window
    assert seen == ["evt_a", "pay-1", "evt_txt", "evt_bin", "gh-1", "evt_b"]


async def test_the_html_list_and_its_links(console: ConsoleHarness) -> None:
    """The list shows the rows; operators get links to the replay planner with the same
    filter (absolute times) or with the page's ids; the next page keeps the filter."""
    ids = await seed(console)
    viewer = await console.client(Role.VIEWER).get("/console/events", params={"limit": "2"})
    assert viewer.status_code == 200
    assert f'href="/console/events/{ids["evt_a"]}"' in viewer.text
    assert "/console/replays/new" not in viewer.text
    assert 'rel="next"' in viewer.text
    operator = await console.client(Role.OPERATOR).get(
        "/console/events", params={"provider": "stripe, github", "since": "2h"}
    )
    hrefs = [
        h.replace("&amp;", "&") for h in operator.text.split('href="')[1:] if "replays/new" in h
    ]
    assert len(hrefs) == 2
    plan = parse_qs(urlsplit(hrefs[0].split('"')[0]).query)
    assert plan["kind"] == ["events"]
    assert plan["provider"] == ["stripe", "github"]
    assert plan["since"][0].endswith("Z") and "T" in plan["since"][0]
    page_ids = parse_qs(urlsplit(hrefs[1].split('"')[0]).query)["id"]
    assert sorted(page_ids) == sorted(str(ids[e]) for e in ["evt_a", "evt_bin", "evt_txt", "gh-1"])
    htmx = await console.client(Role.VIEWER).get("/console/events", headers={"HX-Request": "true"})
    assert "<html" not in htmx.text and "<table>" in htmx.text


async def test_detail_for_a_viewer_shows_state_but_no_payload(console: ConsoleHarness) -> None:
    ids = await seed(console)
    r = await console.client(Role.VIEWER).get(f"/console/events/{ids['pay-1']}")
    assert r.status_code == 200
    text = r.text
    assert "<strong>published</strong>" in text
    assert "<strong>settled</strong>, 2 attempt(s)" in text
    assert "1250" not in text and "EUR" not in text  # read from the body
    assert "Key <code>s_1</code>, sequence 1" in text and "<strong>applied</strong>" in text
    dlq_id = await console.fetchval("SELECT id FROM dlq_webhooks WHERE event_id = 'pay-1'")
    assert f'href="/console/dlq/{dlq_id}"' in text and "LEDGER_UNAVAILABLE" in text
    assert "shown to investigators and above" in text
    assert "settlement_id" not in text  # no body
    assert r.headers.get("cache-control") != "no-store"
    assert await console.audit("payload.view") == []
    api = (await console.client(Role.VIEWER).get(f"/console/api/v1/events/{ids['pay-1']}")).json()
    assert api["payload"] is None and api["headers"] is None
    assert api["settlement"] == {"state": "settled", "reason": "", "attempts": 2}
    assert api["key"]["outcome"] == "applied"
    assert [d["stage"] for d in api["dead_letters"]] == ["settlement"]


async def test_settlement_for_an_investigator(console: ConsoleHarness) -> None:
    """What settlement read from the body is shown with the payload."""
    ids = await seed(console)
    client = console.client(Role.INVESTIGATOR)
    page = await client.get(f"/console/events/{ids['pay-1']}")
    assert "<strong>settled</strong>" in page.text and "12.50 EUR" in page.text
    api = (await client.get(f"/console/api/v1/events/{ids['pay-1']}")).json()
    instruction = from_internal("payment.captured", CAPTURED)
    assert instruction is not None
    assert api["settlement"] == {
        "state": "settled",
        "reason": "",
        "attempts": 2,
        "kind": "capture",
        "settlement_id": "s_1",
        "amount_minor": 1250,
        "currency": "EUR",
        "transfer_id": f"{transfer_id(instruction):#034x}",
    }


async def test_detail_for_an_investigator_escapes_and_audits(console: ConsoleHarness) -> None:
    ids = await seed(console)
    r = await console.client(Role.INVESTIGATOR).get(f"/console/events/{ids['evt_a']}")
    assert r.status_code == 200
    assert r.headers["cache-control"] == "no-store"
    assert "<script>alert(1)" not in r.text and "<img src=x" not in r.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in r.text
    assert "t=1,v1=abc" not in r.text and "[masked]" in r.text
    assert "stripe events of type invoice.paid do not settle" in r.text
    (row,) = await console.audit("payload.view")
    assert (row["actor"], row["target"], row["outcome"]) == (
        "console:investigator",
        f"event:{ids['evt_a']}",
        "ok",
    )
    api = await console.client(Role.INVESTIGATOR).get(f"/console/api/v1/events/{ids['evt_a']}")
    assert api.headers["cache-control"] == "no-store"
    assert api.json()["headers"]["stripe-signature"] == "[masked]"
    assert orjson.loads(api.json()["payload"]["text"])["note"] == HOSTILE
    assert len(await console.audit("payload.view")) == 2


async def test_bodies_that_are_not_json(console: ConsoleHarness) -> None:
    """Invalid UTF-8 is shown as hex; a removed body says so; a parked row says why."""
    ids = await seed(console)
    client = console.client(Role.INVESTIGATOR)
    binary = await client.get(f"/console/events/{ids['evt_bin']}")
    assert "shown as hex" in binary.text and "ff fe 00 62" in binary.text
    assert "<strong>no subject</strong>" in binary.text
    gone = await client.get(f"/console/events/{ids['evt_old']}", params={})
    assert "Removed by retention" in gone.text
    parked = await client.get(f"/console/events/{ids['evt_txt']}")
    assert "<strong>parked</strong>" in parked.text and "PUBLISH_FAILED" in parked.text


@pytest.mark.parametrize("row_id", ["999999", "abc", "0"])
async def test_an_unknown_event_is_404(console: ConsoleHarness, row_id: str) -> None:
    assert (await console.client(Role.VIEWER).get(f"/console/events/{row_id}")).status_code == 404
    api = await console.client(Role.VIEWER).get(f"/console/api/v1/events/{row_id}")
    assert api.status_code == 404
    assert api.headers["content-type"].startswith("application/problem+json")
