"""The console's held keys against a real PostgreSQL: the list (oldest hold first, its
dead letter linked), and a release by an operator that does what `gateway ordering
release` does (the holder resolved by hand with the note and the console's name, the
number skipped and logged, the hold cleared) with its audit row in the same
transaction: an audit write that fails leaves the key held."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import orjson
import pytest

from gateway.core.console.roles import Role
from tests.support.console import ConsoleHarness


async def park(console: ConsoleHarness, provider: str, key: str, seq: int, error_class: str) -> int:
    """An open settlement dead letter of `key` at `seq`, as settlement parks one."""
    row_id: int = await console.fetchval(
        "INSERT INTO dlq_webhooks (stage, provider, event_id, error_class, error_message,"
        " payload, order_key, key_seq)"
        " VALUES ('settlement', $1, $2, $3, 'x', '\\x7b7d', $4, $5) RETURNING id",
        provider,
        f"evt_{key}_{seq}",
        error_class,
        key,
        seq,
    )
    return row_id


async def key(
    console: ConsoleHarness,
    provider: str,
    order_key: str,
    *,
    last: int,
    applied: int,
    held: tuple[int, int, str, timedelta] | None = None,
) -> None:
    """A key numbered up to `last`, applied up to `applied` (each number logged);
    `held`: (seq, dead letter, reason, how long ago)."""
    async with console.pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO order_counters (provider, order_key, last_seq) VALUES ($1, $2, $3)",
            provider,
            order_key,
            last,
        )
        seq, dlq_id, reason, ago = held or (None, None, None, None)
        await conn.execute(
            "INSERT INTO order_applied (provider, order_key, applied_seq, held_seq,"
            " held_dlq_id, hold_reason, held_at)"
            " VALUES ($1, $2, $3, $4, $5, $6, now() - $7::interval)",
            provider,
            order_key,
            applied,
            seq,
            dlq_id,
            reason,
            ago,
        )
        await conn.executemany(
            "INSERT INTO order_log (provider, order_key, key_seq, outcome, event_id)"
            " VALUES ($1, $2, $3, 'applied', $4)",
            [(provider, order_key, s, f"evt_{order_key}_{s}") for s in range(1, applied + 1)],
        )


async def seed(console: ConsoleHarness) -> dict[str, int]:
    """stripe pi_A held at 3 for 20 min (4 and 5 parked behind); service:billing inv_C
    held at 1 for 2 h; stripe pi_B not held."""
    holder = await park(console, "stripe", "pi_A", 3, "UNKNOWN_MERCHANT")
    blocked = [await park(console, "stripe", "pi_A", s, "BLOCKED_BY_PREDECESSOR") for s in (4, 5)]
    await key(console, "stripe", "pi_A", last=5, applied=2,
              held=(3, holder, "UNKNOWN_MERCHANT", timedelta(minutes=20)))  # fmt: skip
    inv = await park(console, "service:billing", "inv_C", 1, "MISSING_FIELD")
    await key(console, "service:billing", "inv_C", last=1, applied=0,
              held=(1, inv, "MISSING_FIELD", timedelta(hours=2)))  # fmt: skip
    await key(console, "stripe", "pi_B", last=4, applied=4)
    return {"holder": holder, "blocked_4": blocked[0], "blocked_5": blocked[1], "inv": inv}


async def held(console: ConsoleHarness) -> list[tuple[str, str]]:
    rows = await console.fetch(
        "SELECT provider, order_key FROM order_applied WHERE held_at IS NOT NULL ORDER BY 1, 2"
    )
    return [(r["provider"], r["order_key"]) for r in rows]


async def test_the_list_oldest_hold_first(console: ConsoleHarness) -> None:
    ids = await seed(console)
    asked_at = console.clock()
    api = await console.client(Role.VIEWER).get("/console/api/v1/keys")
    answered_at = console.clock()
    assert api.status_code == 200
    items = api.json()["items"]
    assert [(k["provider"], k["order_key"]) for k in items] == [
        ("service:billing", "inv_C"),
        ("stripe", "pi_A"),
    ]
    a = items[1]
    assert (a["held_seq"], a["applied_seq"], a["last_seq"], a["blocked"]) == (3, 2, 5, 2)
    assert a["hold_reason"] == "UNKNOWN_MERCHANT" and a["held_dlq_id"] == ids["holder"]
    # The age is the console's clock at the request less the hold's time (the seeded
    # hold is 20 min old by the database's clock, which the console's clock shares).
    held_at = datetime.fromisoformat(a["held_at"])
    assert (asked_at - held_at).total_seconds() - 0.001 <= a["held_for_s"]
    assert a["held_for_s"] <= (answered_at - held_at).total_seconds() + 0.001
    assert a["held_for_s"] >= 1190
    asked_at = console.clock()
    page = await console.client(Role.VIEWER).get("/console/keys")
    answered_at = console.clock()
    assert page.status_code == 200
    assert f'href="/console/dlq/{ids["holder"]}"' in page.text
    # Each age in whole minutes, as the console's clock read it; at least the seeded age.
    for item, seeded_min in zip(items, (120, 20), strict=True):
        since = datetime.fromisoformat(item["held_at"])
        low = int(((asked_at - since).total_seconds() - 0.001) // 60)
        high = int(((answered_at - since).total_seconds() + 0.001) // 60)
        shown = [f"({m} min)" for m in range(low, high + 1)]
        assert any(s in page.text for s in shown), shown
        assert low >= seeded_min - 1
    assert "/console/keys/release" not in page.text  # a viewer gets no release form
    only = await console.client(Role.VIEWER).get(
        "/console/api/v1/keys", params={"provider": "stripe"}
    )
    assert [k["order_key"] for k in only.json()["items"]] == ["pi_A"]


async def test_pages_by_cursor(console: ConsoleHarness) -> None:
    await seed(console)
    client = console.client(Role.VIEWER)
    first = (await client.get("/console/api/v1/keys", params={"limit": "1"})).json()
    assert [k["order_key"] for k in first["items"]] == ["inv_C"]
    params = {"limit": "1", "cursor": first["next_cursor"]}
    second = (await client.get("/console/api/v1/keys", params=params)).json()
    assert [k["order_key"] for k in second["items"]] == ["pi_A"]
    assert second["next_cursor"] is None
    bad = await client.get("/console/api/v1/keys", params={"cursor": "nope"})
    assert bad.status_code == 400 and "cursor" in bad.json()["detail"]


async def test_an_operator_releases_a_key_from_the_page(console: ConsoleHarness) -> None:
    """The form posts, the answer is a redirect back with the release's line; the key
    moved as the CLI moves it, and the audit row names the operator."""
    ids = await seed(console)
    browser = await console.session_client(Role.OPERATOR)
    page = await browser.get("/console/keys")
    assert 'action="/console/keys/release"' in page.text
    assert f"/console/replays/new?kind=dlq&amp;id={ids['holder']}" in page.text
    r = await browser.post(
        "/console/keys/release",
        data={"provider": "stripe", "key": "pi_A", "note": "merchant onboarded late"},
    )
    assert r.status_code == 303
    back = await browser.get(r.headers["location"])
    assert "released stripe key pi_A (UNKNOWN_MERCHANT)" in back.text
    assert await held(console) == [("service:billing", "inv_C")]
    holder = (
        await console.fetch(
            "SELECT is_resolved, resolution, resolved_by, resolution_note FROM dlq_webhooks"
            " WHERE id = $1",
            ids["holder"],
        )
    )[0]
    assert tuple(holder) == (True, "manual", "console:operator", "merchant onboarded late")
    log = await console.fetch(
        "SELECT key_seq, outcome, actor, note FROM order_log"
        " WHERE order_key = 'pi_A' AND outcome = 'skipped'"
    )
    assert [tuple(x) for x in log] == [
        (3, "skipped", "console:operator", "merchant onboarded late")
    ]
    (audit,) = await console.audit("key.release")
    assert (audit["actor"], audit["target"], audit["outcome"], audit["via"]) == (
        "console:operator",
        "key:stripe/pi_A",
        "ok",
        "cookie",
    )
    detail = orjson.loads(audit["detail"])
    assert detail["parked_behind"] == [ids["blocked_4"], ids["blocked_5"]]
    assert detail["note"] == "merchant onboarded late"


@pytest.mark.parametrize(
    ("body", "status", "detail"),
    [
        ({"provider": "stripe", "order_key": "pi_A", "note": "  "}, 400, "the note must say"),
        ({"provider": "stripe", "order_key": "pi_B", "note": "n"}, 409, "is not held"),
        ({"provider": "stripe", "order_key": "pi_Z", "note": "n"}, 404, "no ordering state"),
        ({"provider": "stripe", "order_key": "pi_A"}, 400, "note are required"),
    ],
)
async def test_refused_releases_change_nothing(
    console: ConsoleHarness, body: dict[str, Any], status: int, detail: str
) -> None:
    await seed(console)
    r = await console.client(Role.OPERATOR).post("/console/api/v1/keys/release", json=body)
    assert r.status_code == status
    assert detail in r.json()["detail"]
    assert await held(console) == [("service:billing", "inv_C"), ("stripe", "pi_A")]
    assert [a["outcome"] for a in await console.audit("key.release") if a["outcome"] == "ok"] == []


async def test_the_api_release_answers_what_it_did(console: ConsoleHarness) -> None:
    ids = await seed(console)
    r = await console.client(Role.OPERATOR).post(
        "/console/api/v1/keys/release",
        json={"provider": "stripe", "order_key": "pi_A", "note": "refunded by support"},
    )
    assert r.status_code == 200
    doc = r.json()
    assert (doc["applied_seq_before"], doc["applied_seq"], doc["skipped"]) == (2, 3, 1)
    assert doc["dead_letter_id"] == ids["holder"]
    assert doc["parked_behind"] == [ids["blocked_4"], ids["blocked_5"]]
    assert doc["released_by"] == "console:operator"


async def test_a_failed_audit_write_leaves_the_key_held(console: ConsoleHarness) -> None:
    """The audit row is written in the release's transaction: when it cannot be, the
    release is rolled back whole."""
    ids = await seed(console)
    async with console.pool.acquire() as conn:
        await conn.execute(
            """
            CREATE FUNCTION refuse_release_audit() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'audit unavailable'; END; $$;
            CREATE TRIGGER refuse_release_audit BEFORE INSERT ON console_audit FOR EACH ROW
            WHEN (NEW.action = 'key.release') EXECUTE FUNCTION refuse_release_audit();
            """
        )
    client = console.client(Role.OPERATOR)
    r = await client.post(
        "/console/api/v1/keys/release",
        json={"provider": "stripe", "order_key": "pi_A", "note": "n"},
    )
    assert r.status_code == 500
    assert await held(console) == [("service:billing", "inv_C"), ("stripe", "pi_A")]
    assert await console.fetchval(
        "SELECT NOT is_resolved FROM dlq_webhooks WHERE id = $1", ids["holder"]
    )
    assert await console.fetchval("SELECT count(*) FROM order_log WHERE outcome = 'skipped'") == 0
