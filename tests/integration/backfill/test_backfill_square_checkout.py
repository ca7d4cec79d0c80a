"""`gateway backfill` of Square (SearchEvents, `POST /v2/events`) against a local
stand-in of its API, a real database and a real JetStream: each event missing is
recorded once under its webhook's `event_id` and `type`, the window and the type filter
go to the API, pages follow Square's cursor with the original query, one malformed
entry is parked without stopping the run, and a refused token stops it with one line.

Checkout.com is not backfilled: its Events API lost its `from`/`to` time filter in 2023
and lists events by payment only (docs/providers.md), so a `checkout` provider with API
keys is refused at start-up, as any scheme without an API to read is."""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import orjson
import pytest

from gateway import settings as settings_mod
from gateway.adapters.provider_api.square_events import SQUARE_VERSION
from gateway.backfill.run import BackfillReport, backfill
from gateway.core.backfill.decisions import Window, make_window
from gateway.errors import ConfigError, ProviderApiAuth, ProviderApiRefused
from gateway.settings.provider_api import parse_provider_api
from gateway.wiring.backfill import backfill_parts
from tests.support.gateway import config, running_server
from tests.support.provider_apis import (
    API_KEY,
    raw,
    running_apis,
    square_event,
    stand_in_keys,
)

ENV = {"PROVIDER_API_KEY": API_KEY}
NOW = datetime.now(UTC).replace(microsecond=0)
OUTAGE = Window(NOW - timedelta(hours=2), NOW)
SQUARE_KEY = "Ibxx_5AKakO-3qeNVR61Dw"
SQUARE_URL = "https://gateway.example/webhooks/square"


def square_doc(database_url: str, nats_url: str) -> dict[str, Any]:
    doc = config(database_url, nats_url)
    doc["providers"]["square"] = {
        "scheme": "square",
        "secrets": [SQUARE_KEY],
        "notification_url": SQUARE_URL,
    }
    return doc


def with_api(doc: dict[str, Any], url: str) -> settings_mod.Settings:
    doc = copy.deepcopy(doc)
    doc["providers"]["square"] |= stand_in_keys(url)
    return settings_mod.parse(doc, env=ENV)


async def run(
    settings: settings_mod.Settings, window: Window = OUTAGE, **kw: Any
) -> BackfillReport:
    async with backfill_parts(settings, "square") as parts:
        return await backfill(parts, window, **kw)


def rfc3339(when: datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def square_signature(body: bytes) -> str:
    """`x-square-hmacsha256-signature`: base64 HMAC-SHA256 of the notification URL
    followed by the body, keyed with the signature key."""
    digest = hmac.new(SQUARE_KEY.encode(), SQUARE_URL.encode() + body, hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


async def test_square_outage_is_recovered_once(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    """Five payments in the outage, one of which reached the gateway as a signed
    webhook: backfill reads two pages (through a 429 with Retry-After and a 500, each
    search retried as a GET is; the second page by Square's cursor, with the first
    page's query), finds the live one present under its `event_id` and records the
    other four once, each under its `event_id` and `type`, as compact JSON; a second
    pass records nothing new."""
    doc = square_doc(database_url, nats_url)
    async with running_apis(page_size=3) as apis, running_server(doc) as gw:
        events = [square_event(n, NOW - timedelta(minutes=90 - 10 * n)) for n in range(5)]
        apis.square_events = events
        live = orjson.dumps(events[2])
        headers = {
            "Content-Type": "application/json",
            "x-square-hmacsha256-signature": square_signature(live),
        }
        answer = await gw.client.post("/webhooks/square", content=live, headers=headers)
        assert answer.json()["status"] == "accepted"

        settings = with_api(doc, apis.url)
        apis.faults = ["429", "500"]
        report = await run(settings)
        assert len(apis.requests) == 4
        t = report.tally
        assert (t.fetched, t.present, t.recovered, t.failed) == (5, 1, 4, 0), report.errors
        assert report.unpublished == 0

        first, second = apis.square_searches
        assert "cursor" not in first and second["cursor"]
        assert second["query"] == first["query"]
        assert apis.square_versions == [SQUARE_VERSION, SQUARE_VERSION]
        assert set(apis.authorizations) == {f"Bearer {API_KEY}"}

        rows = await db.fetch(
            "SELECT event_id, event_type, subject, source, body, headers::text AS h "
            "FROM processed_webhooks WHERE provider = 'square' ORDER BY event_id"
        )
        assert [(r["event_id"], r["event_type"], r["source"]) for r in rows] == [
            (e["event_id"], "payment.updated", "live" if i == 2 else "backfill")
            for i, e in enumerate(events)
        ]
        assert {r["subject"] for r in rows} == {"webhooks.square.payment.updated"}
        recovered = next(r for r in rows if r["event_id"] == events[1]["event_id"])
        assert bytes(recovered["body"]) == orjson.dumps(events[1])  # the event, compact
        assert json.loads(recovered["h"]) == {"content-type": "application/json"}

        again = await run(settings, Window(OUTAGE.since, OUTAGE.until - timedelta(seconds=1)))
        assert (again.tally.fetched, again.tally.present, again.tally.recovered) == (5, 5, 0)
        count = await db.fetchval("SELECT count(*) FROM processed_webhooks")
        assert count == 5


async def test_square_window_and_types_go_to_the_api(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    """The window is SearchEvents' `created_at` range and `--type` its `event_types`,
    newest first: only the payments inside the window are recovered, not the refunds
    beside them nor the payments outside it."""
    async with running_apis() as apis:
        payments = [square_event(n, NOW - timedelta(minutes=200 - 20 * n)) for n in range(10)]
        refunds = [
            square_event(100 + n, NOW - timedelta(minutes=95 - 20 * n), "refund.updated")
            for n in range(3)
        ]
        apis.square_events = payments + refunds
        settings = with_api(square_doc(database_url, nats_url), apis.url)
        since, until = NOW - timedelta(minutes=100), NOW - timedelta(minutes=30)
        window = make_window(since, until, ["payment.updated"], NOW)
        report = await run(settings, window)
        assert apis.square_searches[0] == {
            "limit": 100,
            "query": {
                "filter": {
                    "created_at": {"start_at": rfc3339(since), "end_at": rfc3339(until)},
                    "event_types": ["payment.updated"],
                },
                "sort": {"field": "DEFAULT", "order": "DESC"},
            },
        }
        inside = {
            e["event_id"]
            for e in payments
            if since <= datetime.fromisoformat(e["created_at"].replace("Z", "+00:00")) < until
        }
        assert report.tally.recovered == len(inside) == 4
        rows = await db.fetch("SELECT event_id, event_type FROM processed_webhooks")
        assert {r["event_id"] for r in rows} == inside
        assert {r["event_type"] for r in rows} == {"payment.updated"}


async def test_a_killed_square_run_continues_with_its_cursor_and_query(
    database_url: str, nats_url: str
) -> None:
    """The run dies after its first page; the next continues from the saved cursor, and
    Square takes it because the query is rebuilt from the saved window, the same."""
    async with running_apis() as apis:
        apis.square_events = [square_event(n, NOW - timedelta(minutes=60 - n)) for n in range(5)]
        settings = with_api(square_doc(database_url, nats_url), apis.url)
        apis.fail_from = (2, "401")
        with pytest.raises(ProviderApiAuth):
            await run(settings)
        saved = apis.square_searches[0]
        apis.fail_from = None
        apis.faults.clear()
        apis.square_searches.clear()
        report = await run(settings, Window(OUTAGE.since + timedelta(minutes=1), NOW))
        assert report.continued and report.continued[0].since == OUTAGE.since
        assert apis.square_searches[0]["cursor"]
        assert apis.square_searches[0]["query"] == saved["query"]
        assert report.tally.recovered == 3


async def test_malformed_square_entries_are_parked_and_the_run_goes_on(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    """Beside a good event, one whose `created_at` has no zone (as SearchEvents' own
    example writes it), one without an `event_id` and an entry that is a string are each
    recorded once and parked with their class; nothing malformed is published."""
    when = NOW - timedelta(minutes=30)
    good = square_event(1, when)
    zoneless = square_event(2, when) | {"created_at": "2022-04-26T10:08:40.454726"}
    no_id = {k: v for k, v in square_event(3, when).items() if k != "event_id"}
    page = {"events": [good, zoneless, no_id, "an entry that is a string"]}
    async with running_apis() as apis:
        apis.faults = [raw(orjson.dumps(page))]
        report = await run(with_api(square_doc(database_url, nats_url), apis.url))
    assert (report.tally.fetched, report.tally.recovered, report.tally.failed) == (4, 4, 0)
    rows = await db.fetch(
        "SELECT event_id, error_class FROM dlq_webhooks WHERE provider = 'square' "
        "AND stage = 'ingest'"
    )
    classes = {r["event_id"]: r["error_class"] for r in rows}
    assert classes.pop(zoneless["event_id"]) == "BACKFILL_ITEM_TIME_INVALID"
    assert sorted(classes.values()) == ["BACKFILL_ITEM_ID_INVALID", "BACKFILL_ITEM_NOT_OBJECT"]
    assert all(e.startswith("sha256:") for e in classes)
    subjects = {
        r["event_id"]: r["subject"]
        for r in await db.fetch("SELECT event_id, subject FROM processed_webhooks")
    }
    assert subjects.pop(good["event_id"]) == "webhooks.square.payment.updated"
    assert set(subjects.values()) == {None}


async def test_a_square_cursor_it_could_not_take_back_ends_the_listing(
    database_url: str, nats_url: str
) -> None:
    """A cursor longer than SearchEvents takes (256 characters) is neither sent nor
    saved: the page's events are recovered and the listing ends with one failed line."""
    when = NOW - timedelta(minutes=30)
    page = {"events": [square_event(1, when)], "cursor": "c" * 300}
    async with running_apis() as apis:
        apis.faults = [raw(orjson.dumps(page))]
        report = await run(with_api(square_doc(database_url, nats_url), apis.url))
    assert (report.tally.recovered, report.tally.failed) == (1, 1)
    assert "cursor" in report.errors[0] and len(apis.requests) == 1


async def test_a_square_answer_reporting_errors_fails_its_page(
    database_url: str, nats_url: str
) -> None:
    """A 200 whose body reports `errors` has no events: the page fails with the codes."""
    errors = {"errors": [{"category": "INVALID_REQUEST_ERROR", "code": "INVALID_VALUE"}]}
    async with running_apis() as apis:
        apis.faults = [raw(orjson.dumps(errors))]
        with pytest.raises(ProviderApiRefused, match="INVALID_VALUE"):
            await run(with_api(square_doc(database_url, nats_url), apis.url))


async def test_a_refused_square_token_stops_with_one_line(database_url: str, nats_url: str) -> None:
    """A 401 is not retried: the run stops with an error naming api_key_env."""
    async with running_apis() as apis:
        apis.square_events = [square_event(1, NOW - timedelta(minutes=5))]
        settings = with_api(square_doc(database_url, nats_url), apis.url)
        apis.faults = ["401"]
        with pytest.raises(ProviderApiAuth, match="api_key_env") as refused:
            await run(settings)
        assert "\n" not in str(refused.value)
        assert len(apis.requests) == 1


def test_square_reads_its_own_api_or_its_sandbox() -> None:
    """By default the production API; the sandbox is on the default allow-list too."""
    env = {"SQUARE_TOKEN": "EAAA-test"}
    path = "providers.square."
    default = parse_provider_api("square", {"api_key_env": "SQUARE_TOKEN"}, path, env)
    assert default is not None and default.url == "https://connect.squareup.com"
    assert default.hosts == ("connect.squareup.com", "connect.squareupsandbox.com")
    keys = {"api_key_env": "SQUARE_TOKEN", "api_url": "https://connect.squareupsandbox.com"}
    sandbox = parse_provider_api("square", keys, path, env)
    assert sandbox is not None and sandbox.url == "https://connect.squareupsandbox.com"


def test_checkout_has_no_api_to_backfill_from() -> None:
    """A Checkout.com provider given API keys is refused with one line naming the key."""
    with pytest.raises(ConfigError) as refused:
        parse_provider_api(
            "checkout", {"api_key_env": "CKO_KEY"}, "providers.checkout.", {"CKO_KEY": "sk_x"}
        )
    assert refused.value.key == "providers.checkout.api_key_env"
    listed = "stripe, stripe_thin, github, paddle, square, mollie, gocardless"
    assert f"read the APIs of {listed}" in str(refused.value)
