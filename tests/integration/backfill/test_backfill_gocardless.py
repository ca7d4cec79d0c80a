"""`gateway backfill` of GoCardless (its Events API, `GET /events`) against a local
stand-in of its API, a real database and a real JetStream.

Each missing event is recorded once, under its `EV…` id and `resource_type.action`
type, as the webhook's row of one event (`{"events":[EVENT]}`), so a webhook of it,
before or after, is a duplicate. The events that move money are recorded as a
webhook's are with an API key: unpublished, a fetch owed, and published only once the
confirm stage has confirmed them (`EV…:confirmed`); the others are published at once.
The window and the type filter go to the API, pages follow `meta.cursors.after`, and
the API's faults are handled as for the other providers: 429 with `Retry-After` and
500 retried, a page that is not the listing or is too large failing its pass, a cursor
handed back again stopping the run, a refused token stopping it with one line, and a
redirect never followed, so the key reaches `api_url`'s host only.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import asyncpg
import orjson
import pytest

from gateway import settings as settings_mod
from gateway.backfill.run import BackfillReport, backfill
from gateway.core.backfill.decisions import Window, make_window
from gateway.errors import (
    BackfillUsageError,
    ProviderApiAnswerInvalid,
    ProviderApiAnswerTooLarge,
    ProviderApiAuth,
    ProviderApiRedirected,
    ProviderApiRefused,
)
from gateway.settings.senders import parse_provider
from gateway.wiring.backfill import backfill_parts, open_source
from tests.support.confirming import QUICK, confirming, serving
from tests.support.gateway import config
from tests.support.gocardless_api import (
    API_KEY,
    GoCardlessApi,
    event,
    running_gocardless_api,
    stand_in_keys,
)
from tests.support.provider_apis import raw, redirect
from tests.support.services import stream_messages, wait_until

SECRET = "gc_backfill_Qm4rTz8wLp2xVb6n"
KEY_ENV = "GOCARDLESS_TEST_TOKEN"
ENV = {KEY_ENV: API_KEY}
NOW = datetime.now(UTC).replace(microsecond=0)
OUTAGE = Window(NOW - timedelta(hours=2), NOW)
VERSION = "2015-07-06"


@pytest.fixture
async def api() -> AsyncIterator[GoCardlessApi]:
    async with running_gocardless_api() as running:
        yield running


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


def gc_doc(database_url: str, nats_url: str, url: str, **keys: Any) -> dict[str, Any]:
    doc = config(database_url, nats_url)
    doc["providers"]["gocardless"] = {
        "scheme": "gocardless", "secrets": [SECRET], **stand_in_keys(url, KEY_ENV), **keys,
    }  # fmt: skip
    doc["confirm"] = dict(QUICK, max_attempts=3)
    return doc


def parsed(doc: dict[str, Any], env: dict[str, str] = ENV) -> settings_mod.Settings:
    return settings_mod.parse(copy.deepcopy(doc), env=env)


async def run(
    settings: settings_mod.Settings, window: Window = OUTAGE, **kw: Any
) -> BackfillReport:
    async with backfill_parts(settings, "gocardless") as parts:
        return await backfill(parts, window, **kw)


def signed_batch(events: list[dict[str, Any]]) -> tuple[bytes, dict[str, str]]:
    """A webhook request as GoCardless sends it: several events, signed together."""
    body = orjson.dumps({"events": events, "meta": {"webhook_id": "WB000BACKFILL"}},
                        option=orjson.OPT_INDENT_2)  # fmt: skip
    mac = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return body, {"Webhook-Signature": mac, "Content-Type": "application/json"}


def outage_events(api: GoCardlessApi) -> list[dict[str, Any]]:
    """Six events 90 to 40 minutes ago: three payments confirmed (their objects on the
    stand-in), three mandates created."""
    events = []
    for n in range(6):
        when = NOW - timedelta(minutes=90 - 10 * n)
        if n % 2 == 0:
            api.payment(f"PM{n:04d}", 1_000 * (n + 1), "GBP", "m_gc")
            events.append(event(n, when, "payments", "confirmed", payment=f"PM{n:04d}"))
        else:
            events.append(event(n, when, "mandates", "created", mandate=f"MD{n:04d}"))
    return events


async def gc_rows(db: asyncpg.Connection) -> list[Any]:
    return list(
        await db.fetch(
            "SELECT event_id, event_type, subject, source, body FROM processed_webhooks "
            "WHERE provider = 'gocardless' ORDER BY event_id"
        )
    )


async def confirmation_states(db: asyncpg.Connection) -> dict[str, str]:
    """The state of each owed fetch, by the event id it confirms."""
    found = await db.fetch(
        "SELECT w.event_id, c.state FROM confirmations c "
        "JOIN processed_webhooks w ON w.id = c.webhook_id"
    )
    return {r["event_id"]: r["state"] for r in found}


async def gc_messages(nats_url: str, count: int) -> list[Any]:
    found = [m for m in await stream_messages(nats_url) if m[0].startswith("webhooks.gocardless.")]
    return found if len(found) >= count else []


async def test_an_outage_is_recovered_once_and_its_money_events_wait_for_their_fetch(
    database_url: str, nats_url: str, api: GoCardlessApi, db: asyncpg.Connection
) -> None:
    """Six events in the outage, two of which (a payment's, a mandate's) reached the
    gateway in a signed webhook. Backfill, through a 429 with Retry-After and a 500, over
    three pages, finds those two present and records the four others once, as the
    webhook's rows of one event each: the mandates' published at once, the payments'
    waiting unpublished with their fetch owed. A second pass records nothing; a webhook
    of a backfilled event is a duplicate. The confirm stage then confirms every payment,
    live or backfilled, and only the confirmed copies of them are published."""
    doc = gc_doc(database_url, nats_url, api.url)
    events = outage_events(api)
    api.events = events
    async with serving(doc, ENV) as server:
        body, headers = signed_batch([events[0], events[3]])
        answer = await server.client.post("/webhooks/gocardless", content=body, headers=headers)
        assert answer.status_code == 200, answer.text

        api.event_faults = ["429", "500"]
        report = await run(parsed(doc))
        t = report.tally
        assert (t.fetched, t.present, t.recovered, t.failed) == (6, 2, 4, 0), report.errors
        assert report.unpublished == 0
        assert len(api.listings) == 5  # two faults, then three pages of two
        first = api.listings[2]
        assert f"created_at%5Bgte%5D={OUTAGE.since.strftime('%Y-%m-%dT%H')}" in first
        assert "created_at%5Blt%5D=" in first and "limit=500" in first
        assert "after=" not in first and "after=EV000000000004" in api.listings[3]
        sent = {(h.get("authorization"), h.get("gocardless-version")) for _, h in api.requests}
        assert sent == {(f"Bearer {API_KEY}", VERSION)}

        rows = await gc_rows(db)
        assert [(r["event_id"], r["event_type"], r["source"]) for r in rows] == [
            (e["id"], f"{e['resource_type']}.{e['action']}", "live" if n in (0, 3) else "backfill")
            for n, e in enumerate(events)
        ]
        backfilled = {r["event_id"]: bytes(r["body"]) for r in rows if r["source"] == "backfill"}
        assert backfilled == {
            events[n]["id"]: orjson.dumps({"events": [events[n]]}) for n in (1, 2, 4, 5)
        }
        assert [(r["event_id"], r["subject"]) for r in rows] == [
            (e["id"], None if n % 2 == 0 else "webhooks.gocardless.mandates.created")
            for n, e in enumerate(events)
        ]
        # Every payment, live or backfilled, owes its fetch; nothing was fetched yet.
        assert await confirmation_states(db) == {events[n]["id"]: "pending" for n in (0, 2, 4)}
        assert api.fetched() == ["/events"] * 5
        messages = await wait_until(partial(gc_messages, nats_url, 3))
        published = sorted((h["Nats-Msg-Id"], h.get("Gateway-Source")) for _, h, _ in messages)
        assert published == [
            (f"gocardless:{events[1]['id']}", "backfill"),
            (f"gocardless:{events[3]['id']}", None),
            (f"gocardless:{events[5]['id']}", "backfill"),
        ]

        again = await run(parsed(doc), Window(OUTAGE.since, OUTAGE.until - timedelta(seconds=1)))
        assert (again.tally.fetched, again.tally.present, again.tally.recovered) == (6, 6, 0)
        assert len(await gc_rows(db)) == 6

        async with confirming(doc, ENV):
            late, late_headers = signed_batch([events[1], events[2]])  # GoCardless retried
            answer = await server.client.post(
                "/webhooks/gocardless", content=late, headers=late_headers
            )
            assert {e["status"] for e in answer.json()["events"]} == {"duplicate"}

            async def all_confirmed() -> bool:
                states = await confirmation_states(db)
                return set(states.values()) == {"confirmed"} and len(states) == 3

            await wait_until(all_confirmed, timeout_s=20)
            messages = await wait_until(partial(gc_messages, nats_url, 6), timeout_s=10)
    confirmed = sorted(h["Nats-Msg-Id"] for s, h, _ in messages if s.endswith("payments.confirmed"))
    assert confirmed == [f"gocardless:{events[n]['id']}:confirmed" for n in (0, 2, 4)]
    assert {p for p in api.fetched() if p != "/events"} == {
        f"/payments/PM{n:04d}" for n in (0, 2, 4)
    }
    assert len(await gc_rows(db)) == 9  # six events, three confirmed copies
    assert await db.fetch("SELECT event_id FROM dlq_webhooks") == []


async def test_the_window_and_a_type_go_to_the_api(
    database_url: str, nats_url: str, api: GoCardlessApi, db: asyncpg.Connection
) -> None:
    """The window is `created_at[gte]`/`[lt]` and one `--type` its `resource_type` and
    `action`: only the confirmed payments inside the window are recovered."""
    payments = [
        event(n, NOW - timedelta(minutes=200 - 20 * n), "payments", "confirmed", payment=f"PM{n}")
        for n in range(10)
    ]
    mandates = [event(100 + n, NOW - timedelta(minutes=95 - 20 * n)) for n in range(3)]
    api.events = payments + mandates
    since, until = NOW - timedelta(minutes=100), NOW - timedelta(minutes=30)
    report = await run(
        parsed(gc_doc(database_url, nats_url, api.url)),
        make_window(since, until, ["payments.confirmed"], NOW),
    )
    first = api.listings[0]
    assert "resource_type=payments" in first and "action=confirmed" in first
    inside = {
        e["id"]
        for e in payments
        if since <= datetime.fromisoformat(e["created_at"].replace("Z", "+00:00")) < until
    }
    assert report.tally.recovered == len(inside) == 4
    rows = await gc_rows(db)
    assert {r["event_id"] for r in rows} == inside
    assert {r["subject"] for r in rows} == {None}  # waiting for their fetch
    assert set((await confirmation_states(db)).values()) == {"pending"}


async def test_malformed_entries_are_parked_and_the_run_goes_on(
    database_url: str, nats_url: str, api: GoCardlessApi, db: asyncpg.Connection
) -> None:
    """Beside a good event, one without an id, one whose `created_at` has no zone, and an
    entry that is a string are each recorded once and parked with their class."""
    when = NOW - timedelta(minutes=30)
    good = event(1, when)
    no_id = {k: v for k, v in event(2, when).items() if k != "id"}
    zoneless = event(3, when) | {"created_at": "2026-12-06T10:00:00.000"}
    page = {"events": [good, no_id, zoneless, "EV000000000004"],
            "meta": {"cursors": {"before": None, "after": None}, "limit": 500}}  # fmt: skip
    api.event_faults = [raw(orjson.dumps(page))]
    report = await run(parsed(gc_doc(database_url, nats_url, api.url)))
    assert (report.tally.fetched, report.tally.recovered, report.tally.failed) == (4, 4, 0)
    found = await db.fetch(
        "SELECT event_id, error_class FROM dlq_webhooks WHERE provider = 'gocardless' "
        "AND stage = 'ingest'"
    )
    classes = {r["event_id"]: r["error_class"] for r in found}
    assert classes.pop(zoneless["id"]) == "BACKFILL_ITEM_TIME_INVALID"
    assert sorted(classes.values()) == ["BACKFILL_ITEM_ID_INVALID", "BACKFILL_ITEM_NOT_OBJECT"]
    assert all(e.startswith("sha256:") for e in classes)
    subjects = {r["event_id"]: r["subject"] for r in await gc_rows(db)}
    assert subjects.pop(good["id"]) == "webhooks.gocardless.mandates.created"
    assert set(subjects.values()) == {None}


@pytest.mark.parametrize(
    ("fault", "error", "says"),
    [
        (raw(b'[{"id": "EV1"}]'), ProviderApiAnswerInvalid, "not the listing's object"),
        (raw(b'{"events": []}'), ProviderApiAnswerInvalid, "meta.cursors is not an object"),
        (raw(b"not json"), ProviderApiAnswerInvalid, "not JSON"),
    ],
)
async def test_a_page_that_is_not_the_listing_fails_its_pass(
    database_url: str, nats_url: str, api: GoCardlessApi, fault: Any, error: type, says: str
) -> None:
    api.event_faults = [fault]
    with pytest.raises(error, match=says) as failed:
        await run(parsed(gc_doc(database_url, nats_url, api.url)))
    assert "\n" not in str(failed.value)
    assert len(api.listings) == 1


async def test_an_answer_past_the_byte_cap_is_refused(
    database_url: str, nats_url: str, api: GoCardlessApi
) -> None:
    api.events = [event(n, NOW - timedelta(minutes=10 - n)) for n in range(2)]
    doc = gc_doc(database_url, nats_url, api.url, api_max_answer_bytes=200)
    with pytest.raises(ProviderApiAnswerTooLarge, match="api_max_answer_bytes"):
        await run(parsed(doc))


async def test_a_cursor_handed_back_again_stops_the_run(
    database_url: str, nats_url: str, api: GoCardlessApi, db: asyncpg.Connection
) -> None:
    """An API naming the same `after` on every page would read the same pages for ever:
    the run stops with one line after the repeat, what it recorded kept once."""
    api.events = [event(n, NOW - timedelta(minutes=10 - n)) for n in range(3)]
    api.after_loop = "EV000000000001"
    with pytest.raises(ProviderApiRefused, match="cursor it had already given"):
        await run(parsed(gc_doc(database_url, nats_url, api.url)))
    assert len(api.listings) == 2
    assert len(await gc_rows(db)) == 2


async def test_a_refused_token_stops_with_one_line(
    database_url: str, nats_url: str, api: GoCardlessApi
) -> None:
    """A 401 is not retried: the run stops with an error naming api_key_env."""
    api.events = [event(1, NOW - timedelta(minutes=5))]
    settings = parsed(gc_doc(database_url, nats_url, api.url), {KEY_ENV: "sandbox_wrong"})
    with pytest.raises(ProviderApiAuth, match="api_key_env") as refused:
        await run(settings)
    assert "\n" not in str(refused.value)
    assert len(api.listings) == 1


async def test_the_key_goes_to_the_api_host_only(
    database_url: str, nats_url: str, api: GoCardlessApi
) -> None:
    """A 302 to another host is not followed: that host sees no request, let alone the
    key, which went to `api_url` alone with the API version."""
    async with running_gocardless_api() as elsewhere:
        elsewhere.events = [event(1, NOW - timedelta(minutes=5))]
        api.event_faults = [redirect(f"http://localhost:{elsewhere.port}/events?limit=500")]
        with pytest.raises(ProviderApiRedirected, match=f"localhost:{elsewhere.port}"):
            await run(parsed(gc_doc(database_url, nats_url, api.url)))
        assert elsewhere.requests == []
    assert [(h.get("authorization"), h.get("gocardless-version")) for _, h in api.requests] == [
        (f"Bearer {API_KEY}", VERSION)
    ]


def test_mollie_has_no_event_listing_to_backfill_from() -> None:
    """Mollie, confirmed by fetch as GoCardless is, lists no past events: refused."""
    provider = parse_provider(
        "mollie", {"scheme": "mollie", "api_key_env": "MOLLIE_KEY"}, {"MOLLIE_KEY": "test_x"}
    )
    with pytest.raises(BackfillUsageError, match="cannot backfill a 'mollie' scheme provider"):
        open_source(provider)
