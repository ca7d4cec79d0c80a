"""The dead letters area as an operator uses it: the list with every filter and its
pages, the group matrix, a row's page (fields, stack, payload views, masked headers,
neighbours, runbook, audit trail), resolving one row and many, and the NDJSON export
in batches, each with the audit rows it must leave; a viewer sees no stack."""

from __future__ import annotations

import base64
import html
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import httpx
import orjson
import pytest

from gateway.adapters.postgres.dead_letters import pages as dead_letter_pages
from gateway.console import dead_letter_export
from gateway.core.console.roles import Role
from tests.support.console import ConsoleHarness
from tests.support.dead_letters import park

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


async def post_form(
    client: httpx.AsyncClient, url: str, pairs: list[tuple[str, str]]
) -> httpx.Response:
    """A form post with repeated fields, as a browser sends checked boxes."""
    return await client.post(url, content=urlencode(pairs), headers=FORM)


async def seed(console: ConsoleHarness) -> dict[str, int]:
    async with console.pool.acquire() as conn:
        ids = {
            "a": await park(conn, "evt_a", first_failed_at=T0),
            "b": await park(
                conn,
                "evt_b",
                stage="ingest",
                event_type=None,
                error_class="EVENT_TYPE_MISSING",
                error_message="no event type in the body",
                first_failed_at=T0 + timedelta(minutes=1),
            ),
            "c": await park(
                conn,
                "evt_c_100%_off",
                provider="github",
                event_type="push",
                attempts=4,
                first_failed_at=T0 + timedelta(minutes=2),
            ),
            "d": await park(
                conn, "evt_d", resolved=True, first_failed_at=T0 + timedelta(minutes=3)
            ),
        }
    return ids


async def test_list_filters_and_pages(console: ConsoleHarness) -> None:
    ids = await seed(console)
    viewer = await console.session_client(Role.VIEWER)
    r = await viewer.get("/console/dlq")
    assert r.status_code == 200
    assert "3</strong> matching" in r.text
    for key in ("a", "b", "c"):
        assert f'href="/console/dlq/{ids[key]}"' in r.text
    assert f'href="/console/dlq/{ids["d"]}"' not in r.text
    r = await viewer.get("/console/dlq", params={"state": "any", "type": "payment_intent.*"})
    assert f'/console/dlq/{ids["a"]}"' in r.text and f'/console/dlq/{ids["d"]}"' in r.text
    assert f'/console/dlq/{ids["c"]}"' not in r.text
    # The search is a literal substring: % is not a wildcard.
    r = await viewer.get("/console/dlq", params={"search": "100%"})
    assert "1</strong> matching" in r.text and f'/console/dlq/{ids["c"]}"' in r.text
    r = await viewer.get("/console/dlq", params={"search": "EVT_%"})
    assert "0</strong> matching" in r.text or "No dead letters match" in r.text
    r = await viewer.get("/console/dlq", params={"min_attempts": "2"})
    assert f'/console/dlq/{ids["c"]}"' in r.text and f'/console/dlq/{ids["a"]}"' not in r.text
    r = await viewer.get("/console/dlq", params={"min_attempts": "lots"})
    assert r.status_code == 400
    assert "--min-attempts: 'lots' is not a whole number" in html.unescape(r.text)
    # Pages of one row: the next link carries the filter and a cursor, never an offset.
    r = await viewer.get("/console/dlq", params={"limit": "1", "stage": "settlement"})
    assert f'/console/dlq/{ids["a"]}"' in r.text and f'/console/dlq/{ids["c"]}"' not in r.text
    start = r.text.index('rel="next"')
    link = html.unescape(
        r.text[
            r.text.rindex('href="', 0, start) + 6 : r.text.index(
                '"', r.text.rindex('href="', 0, start) + 6
            )
        ]
    )
    assert "cursor=" in link and "stage=settlement" in link and "offset" not in link
    r = await viewer.get(link)
    assert f'/console/dlq/{ids["c"]}"' in r.text and f'/console/dlq/{ids["a"]}"' not in r.text
    assert 'rel="next"' not in r.text


async def test_api_list_follows_cursors_and_refuses_bad_filters(console: ConsoleHarness) -> None:
    ids = await seed(console)
    api = console.client(Role.VIEWER)
    seen, cursor = [], None
    while True:
        r = await api.get(
            "/console/api/v1/dlq", params={"limit": "2", **({"cursor": cursor} if cursor else {})}
        )
        assert r.status_code == 200
        doc = r.json()
        seen += [item["id"] for item in doc["items"]]
        cursor = doc["next_cursor"]
        if cursor is None:
            break
    assert seen == [ids["a"], ids["b"], ids["c"]]
    r = await api.get("/console/api/v1/dlq", params={"type": "a*b"})
    assert r.status_code == 400
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "--type" in r.json()["detail"]
    r = await api.get("/console/api/v1/dlq", params={"cursor": "forged"})
    assert r.status_code == 400 and "cursor" in r.json()["detail"]


async def test_groups_link_to_filtered_lists(console: ConsoleHarness) -> None:
    ids = await seed(console)
    viewer = await console.session_client(Role.VIEWER)
    r = await viewer.get("/console/dlq/groups")
    assert r.status_code == 200
    assert "UNKNOWN_MERCHANT" in r.text and "EVENT_TYPE_MISSING" in r.text
    marker = 'aria-label="1 EVENT_TYPE_MISSING at ingest"'
    assert marker in r.text
    at = r.text.index(marker)
    href = html.unescape(r.text[r.text.rindex('href="', 0, at) + 6 : r.text.rindex('"', 0, at - 1)])
    r = await viewer.get(href)
    assert f'/console/dlq/{ids["b"]}"' in r.text and f'/console/dlq/{ids["a"]}"' not in r.text


async def test_detail_page_for_an_investigator(console: ConsoleHarness) -> None:
    ids = await seed(console)
    browser = await console.session_client(Role.INVESTIGATOR)
    r = await browser.get(f"/console/dlq/{ids['a']}")
    assert r.status_code == 200
    assert r.headers["cache-control"] == "no-store"
    assert "<details>" in r.text and "Traceback (most recent call last)" in r.text
    assert '{\n  "id": "evt_a",\n  "type": "payment_intent.succeeded"' in html.unescape(r.text)
    assert "SHA-256" in r.text and f"/console/dlq/{ids['a']}/payload" in r.text
    assert "5257a869e7ec" not in r.text and "[masked]" in r.text
    assert "0af7651916cd43dd8448eb211c80319c" in r.text
    assert "gateway dlq replay --id" in r.text and "gateway ledger open-account" in r.text
    assert "/console/events/" in r.text
    views = await console.audit("payload.view")
    assert [(v["actor"], v["target"]) for v in views] == [
        ("console:investigator", f"dlq:{ids['a']}")
    ]


async def test_detail_page_for_a_viewer_hides_payload_and_header_values(
    console: ConsoleHarness,
) -> None:
    ids = await seed(console)
    browser = await console.session_client(Role.VIEWER)
    r = await browser.get(f"/console/dlq/{ids['a']}")
    assert r.status_code == 200
    assert "metadata only" in r.text
    assert "amount" not in r.text and "5257a869" not in r.text and "Stripe/1.0" not in r.text
    assert "Stripe-Signature" in r.text  # the names are metadata
    # The stack may quote the payload: hidden, and said so. So may a settlement
    # message (it names the merchant or amount it failed on): its length, not its text.
    assert "Traceback" not in r.text and "steps.py" not in r.text
    assert "the stack may quote the payload" in r.text
    assert "UNKNOWN_MERCHANT" in r.text and "no ledger account for evt_a" not in r.text
    shown = len("no ledger account for evt_a")
    assert f"withheld: {shown} characters that may quote the payload" in r.text
    assert await console.audit("payload.view") == []
    r = await browser.get(f"/console/dlq/{ids['a']}/payload")
    assert r.status_code == 403


async def test_the_stack_needs_the_payload_capability_in_the_api(console: ConsoleHarness) -> None:
    async with console.pool.acquire() as conn:
        row = await park(conn, "evt_stack")
    viewer = (await console.client(Role.VIEWER).get(f"/console/api/v1/dlq/{row}")).json()
    assert "error_detail" not in viewer
    assert viewer["error_class"] == "UNKNOWN_MERCHANT"
    # A settlement message may quote the event, as the stack may: its length only.
    assert viewer["error_message"] is None and viewer["error_message_withheld"] is True
    assert viewer["error_message_chars"] == len("no ledger account for evt_stack")
    r = await console.client(Role.INVESTIGATOR).get(f"/console/api/v1/dlq/{row}")
    assert r.json()["error_detail"].startswith("Traceback (most recent call last)")
    assert r.json()["error_message"] == "no ledger account for evt_stack"
    assert r.headers["cache-control"] == "no-store"
    differ = {"error_detail", "error_message", "error_message_withheld"}
    assert {k: v for k, v in r.json().items() if k not in differ} == {
        k: v for k, v in viewer.items() if k not in differ
    }


async def test_download_is_an_audited_attachment(console: ConsoleHarness) -> None:
    async with console.pool.acquire() as conn:
        row_id = await park(conn, "evt_bin", payload=b"\x00\xffraw")
    r = await console.client(Role.INVESTIGATOR).get(f"/console/dlq/{row_id}/payload")
    assert r.status_code == 200 and r.content == b"\x00\xffraw"
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.headers["content-disposition"].startswith("attachment;")
    assert r.headers["cache-control"] == "no-store"
    assert len(await console.audit("payload.view")) == 1
    r = await console.client(Role.INVESTIGATOR).get("/console/api/v1/dlq/999999/payload")
    assert r.status_code == 404


async def test_neighbours_on_the_key(console: ConsoleHarness) -> None:
    async with console.pool.acquire() as conn:
        rows = [
            await park(
                conn,
                f"evt_k{n}",
                order_key="pi_1",
                key_seq=n,
                first_failed_at=T0 + timedelta(seconds=n),
            )
            for n in (1, 2, 3)
        ]
        other = await park(conn, "evt_other", order_key="pi_2", key_seq=2)
    r = await console.client(Role.VIEWER).get(f"/console/dlq/{rows[1]}")
    assert "Its key's other dead letters" in html.unescape(r.text)
    assert f'/console/dlq/{rows[0]}"' in r.text and f'/console/dlq/{rows[2]}"' in r.text
    assert f'/console/dlq/{other}"' not in r.text


async def test_resolve_one_by_form_and_api(console: ConsoleHarness) -> None:
    ids = await seed(console)
    operator = await console.session_client(Role.OPERATOR)
    r = await operator.post(f"/console/dlq/{ids['a']}/resolve", data={"note": "  "})
    assert r.status_code == 400 and "note" in r.text
    assert not await console.fetchval(
        "SELECT is_resolved FROM dlq_webhooks WHERE id = $1", ids["a"]
    )
    r = await operator.post(
        f"/console/dlq/{ids['a']}/resolve", data={"note": "refunded, ticket 8812"}
    )
    assert (
        r.status_code == 303 and r.headers["location"] == f"/console/dlq/{ids['a']}?done=resolved"
    )
    row = (await console.fetch("SELECT * FROM dlq_webhooks WHERE id = $1", ids["a"]))[0]
    assert row["is_resolved"] and row["resolution"] == "manual"
    assert (
        row["resolved_by"] == "console:operator"
        and row["resolution_note"] == "refunded, ticket 8812"
    )
    audit = await console.audit("dlq.resolve")
    assert [(a["actor"], a["target"]) for a in audit] == [("console:operator", f"dlq:{ids['a']}")]
    r = await operator.get(f"/console/dlq/{ids['a']}?done=resolved")
    assert "Resolved by hand" in r.text and "dlq.resolve" in r.text  # its own audit trail
    r = await operator.post(f"/console/dlq/{ids['a']}/resolve", data={"note": "again"})
    assert r.status_code == 409
    api = console.client(Role.OPERATOR)
    r = await api.post(f"/console/api/v1/dlq/{ids['b']}/resolve", json={"note": "ok"})
    assert r.status_code == 200 and r.json()["resolved_by"] == "console:operator"
    r = await api.post(f"/console/api/v1/dlq/{ids['b']}/resolve", json={"note": "ok"})
    assert r.status_code == 409
    r = await api.post(f"/console/api/v1/dlq/{ids['c']}/resolve", json={})
    assert r.status_code == 400


async def test_bulk_resolve_by_ids_and_by_filter(console: ConsoleHarness) -> None:
    ids = await seed(console)
    operator = await console.session_client(Role.OPERATOR)
    form = [
        ("scope", "ids"),
        ("id", str(ids["a"])),
        ("id", str(ids["b"])),
        ("note", "bulk fix"),
        ("confirm", "3"),
    ]
    r = await post_form(operator, "/console/dlq/resolve", form)
    assert r.status_code == 400 and "type 2" in r.text
    form[-1] = ("confirm", "2")
    r = await post_form(operator, "/console/dlq/resolve", form)
    assert r.status_code == 303 and "done=2" in r.headers["location"]
    assert await console.fetchval("SELECT count(*) FROM dlq_webhooks WHERE NOT is_resolved") == 1
    assert len(await console.audit("dlq.resolve")) == 2
    [bulk] = await console.audit("dlq.resolve.bulk")
    assert orjson.loads(bulk["detail"])["resolved"] == 2
    # All matching a filter: the count to type is the number of open matching rows.
    async with console.pool.acquire() as conn:
        for n in range(3):
            await park(conn, f"evt_gh{n}", provider="github", event_type="push")
    r = await operator.get("/console/dlq", params={"provider": "github"})
    assert "Resolve all 4 matching" in r.text
    filt = [("scope", "filter"), ("provider", "github"), ("note", "repo deleted")]
    r = await post_form(operator, "/console/dlq/resolve", [*filt, ("confirm", "3")])
    assert r.status_code == 400
    r = await post_form(operator, "/console/dlq/resolve", [*filt, ("confirm", "4")])
    assert r.status_code == 303 and r.headers["location"].startswith("/console/dlq?provider=github")
    assert await console.fetchval("SELECT count(*) FROM dlq_webhooks WHERE NOT is_resolved") == 0
    assert set(
        await console.fetchval(
            "SELECT array_agg(DISTINCT resolved_by) FROM dlq_webhooks WHERE resolution = 'manual'"
        )
    ) == {"console:operator"}


async def test_export_ndjson(console: ConsoleHarness) -> None:
    ids = await seed(console)
    r = await console.client(Role.VIEWER).get("/console/dlq/export.ndjson", params={"state": "any"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
    lines = [orjson.loads(line) for line in r.content.splitlines()]
    assert [d["id"] for d in lines] == [ids["a"], ids["b"], ids["c"], ids["d"]]
    assert all("payload_base64" not in d and "headers" not in d for d in lines)
    assert all("error_detail" not in d for d in lines), "the stack may quote the payload"
    assert b"Traceback" not in r.content
    # The export without payloads carries no text that may quote the event.
    assert lines[1]["error_message"] is None and lines[1]["error_message_withheld"] is True
    assert lines[1]["error_message_chars"] == len("no event type in the body")
    assert await console.audit("payload.view") == []
    r = await console.client(Role.VIEWER).get(
        "/console/dlq/export.ndjson", params={"payloads": "1"}
    )
    assert r.status_code == 403
    r = await console.client(Role.INVESTIGATOR).get(
        "/console/dlq/export.ndjson", params={"payloads": "1", "stage": "ingest"}
    )
    [doc] = [orjson.loads(line) for line in r.content.splitlines()]
    assert doc["id"] == ids["b"] and doc["payload_base64"]
    assert doc["error_detail"].startswith("Traceback (most recent call last)")
    assert r.headers["cache-control"] == "no-store"
    [view] = await console.audit("payload.view")
    assert view["target"] == "dlq:export"


async def test_an_export_of_many_batches_is_whole_and_in_order(
    console: ConsoleHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of 3 rows, and of at most 2,500 payload bytes with payloads: 8 rows of
    1,000 to 4,000 bytes (one heavier than a batch) come whole, in the list's order."""
    monkeypatch.setattr(dead_letter_export, "BATCH_ROWS", 3)
    monkeypatch.setattr(dead_letter_export, "BATCH_PAYLOAD_BYTES", 2_500)
    sizes = [1_000, 1_000, 1_000, 4_000, 1_200, 1_200, 100, 2_500]
    async with console.pool.acquire() as conn:
        rows = [
            await park(
                conn,
                f"evt_batch{n}",
                payload=bytes([65 + n]) * size,
                # Out of id order: the export follows first_failed_at, then id.
                first_failed_at=T0 + timedelta(minutes=(n * 5) % 8),
            )
            for n, size in enumerate(sizes)
        ]
    order = [row for _, row in sorted(zip([(n * 5) % 8 for n in range(8)], rows, strict=True))]
    batches: list[list[int]] = []
    real = dead_letter_pages.stream_rows_with_payloads

    async def spy(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        batch = await real(*args, **kwargs)
        batches.append([len(b["payload"]) for b in batch])
        return batch

    monkeypatch.setattr(dead_letter_pages, "stream_rows_with_payloads", spy)
    r = await console.client(Role.VIEWER).get("/console/dlq/export.ndjson")
    assert [orjson.loads(line)["id"] for line in r.content.splitlines()] == order
    r = await console.client(Role.INVESTIGATOR).get(
        "/console/dlq/export.ndjson", params={"payloads": "1"}
    )
    docs = [orjson.loads(line) for line in r.content.splitlines()]
    assert [d["id"] for d in docs] == order
    payloads = {
        row: bytes([65 + n]) * size for n, (row, size) in enumerate(zip(rows, sizes, strict=True))
    }
    assert all(base64.b64decode(d["payload_base64"]) == payloads[d["id"]] for d in docs)
    assert all(sum(b) <= 2_500 or len(b) == 1 for b in batches), batches
    assert len(batches) > 3 and batches[-1] == [], "ends on an empty batch"


async def test_detail_of_an_emptied_row_of_an_unknown_class(console: ConsoleHarness) -> None:
    """A row retention emptied, with a class another version wrote, still has its page;
    its download is gone (410)."""
    async with console.pool.acquire() as conn:
        row_id = await park(conn, "evt_old", error_class="FROM_THE_FUTURE", with_event=False)
        await conn.execute(
            "UPDATE dlq_webhooks SET payload = ''::bytea, headers = '{}',"
            " payload_removed_at = now() WHERE id = $1",
            row_id,
        )
    investigator = console.client(Role.INVESTIGATOR)
    r = await investigator.get(f"/console/dlq/{row_id}")
    assert r.status_code == 200
    assert "Retention removed the payload." in r.text
    assert "FROM_THE_FUTURE is not a code this gateway knows" in r.text
    assert "no event row" in r.text
    r = await investigator.get(f"/console/dlq/{row_id}/payload")
    assert r.status_code == 410
    r = await investigator.get("/console/dlq/9223372036854775808")
    assert r.status_code == 404
    operator = await console.session_client(Role.OPERATOR)
    r = await operator.get("/console/dlq")
    assert "Plan a replay of the selected rows" in r.text and "Resolve selected" in r.text
