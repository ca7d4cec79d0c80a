"""One malformed entry of a provider's listing never stops a backfill: it is recorded
and parked with its own class (or, without bytes to record, counted failed with one
line), and the run goes on. A page that keeps failing is skipped after
`api_page_attempts` passes, counted for the alert, and later passes go on."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import orjson
import pytest

from gateway import settings as settings_mod
from gateway.backfill.run import BackfillReport, backfill
from gateway.core.backfill.decisions import Window
from gateway.errors import ProviderApiAnswerInvalid, ProviderApiUnavailable
from gateway.metrics import Metrics
from gateway.wiring.backfill import backfill_parts
from tests.support import vectors
from tests.support.gateway import SECRETS, config
from tests.support.provider_apis import (
    API_KEY,
    HOOK_ID,
    REPO,
    GitHubDelivery,
    paddle_event,
    raw,
    running_apis,
    stand_in_keys,
    stripe_event,
)

NOW = datetime.now(UTC).replace(microsecond=0)
WINDOW = Window(NOW - timedelta(hours=2), NOW)
ENV = {"PROVIDER_API_KEY": API_KEY}


def with_api(doc: dict[str, Any], url: str, **keys: Any) -> settings_mod.Settings:
    doc = copy.deepcopy(doc)
    p = doc["providers"]
    for name in ("stripe", "paddle"):
        p[name] |= stand_in_keys(url) | keys
    p["github"] |= stand_in_keys(url) | keys | {"repo": REPO, "hook_id": HOOK_ID}
    return settings_mod.parse(doc, env=ENV)


async def run(
    settings: settings_mod.Settings,
    name: str,
    window: Window = WINDOW,
    metrics: Metrics | None = None,
) -> BackfillReport:
    async with backfill_parts(settings, name, metrics) as parts:
        return await backfill(parts, window)


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


async def parked(db: asyncpg.Connection, provider: str) -> dict[str, str]:
    """event id -> error class of the provider's ingest dead letters."""
    rows = await db.fetch(
        "SELECT event_id, error_class FROM dlq_webhooks WHERE provider = $1 AND stage = 'ingest'",
        provider,
    )
    return {r["event_id"]: r["error_class"] for r in rows}


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def stripe_page(entries: list[Any]) -> bytes:
    """A Stripe list page written by the standard encoder (orjson refuses some entries)."""
    return json.dumps({"object": "list", "has_more": False, "data": entries}).encode()


async def test_each_malformed_stripe_entry_is_parked_and_the_run_goes_on(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    """The issue's triggers on one page, beside a good event: the good one is recovered
    and published; each bad one is recorded once and parked with its own class; a
    second run finds every one present."""
    when = NOW - timedelta(minutes=30)
    good = stripe_event(1, when)
    entries = [
        good,
        stripe_event(2, when) | {"id": "evt_\x00nul"},
        stripe_event(3, when) | {"id": "evt_deep", "data": {"object": nested(300)}},
        stripe_event(4, when) | {"id": "evt_wide", "data": {"object": {"amount": 2**64}}},
        {k: v for k, v in stripe_event(5, when).items() if k != "id"},
        stripe_event(6, when) | {"id": "evt_text_time", "created": str(int(when.timestamp()))},
        "an entry that is a string",
    ]
    async with running_apis() as apis:
        apis.faults = [raw(stripe_page(entries)), raw(stripe_page(entries))]
        settings = with_api(config(database_url, nats_url), apis.url)
        report = await run(settings, "stripe")
        t = report.tally
        assert (t.fetched, t.recovered, t.failed) == (7, 7, 0), report.errors
        classes = await parked(db, "stripe")
        by_class = sorted(classes.values())
        assert by_class == sorted(
            [
                "BACKFILL_ITEM_ID_INVALID",  # the NUL
                "BACKFILL_ITEM_UNENCODABLE",  # 300 levels
                "BACKFILL_ITEM_UNENCODABLE",  # 2**64
                "BACKFILL_ITEM_ID_INVALID",  # no id
                "BACKFILL_ITEM_TIME_INVALID",  # created as a string
                "BACKFILL_ITEM_NOT_OBJECT",  # a string
            ]
        )
        assert classes["evt_deep"] == classes["evt_wide"] == "BACKFILL_ITEM_UNENCODABLE"
        assert classes["evt_text_time"] == "BACKFILL_ITEM_TIME_INVALID"
        digests = [e for e in classes if e.startswith("sha256:")]
        assert len(digests) == 3  # the NUL id, the missing id, the string
        rows = await db.fetch(
            "SELECT event_id, subject, body FROM processed_webhooks WHERE provider = 'stripe'"
        )
        subjects = {r["event_id"]: r["subject"] for r in rows}
        assert subjects.pop(good["id"]) == "webhooks.stripe.payment_intent.succeeded"
        assert set(subjects.values()) == {None}  # nothing malformed is published
        wide = next(bytes(r["body"]) for r in rows if r["event_id"] == "evt_wide")
        assert json.loads(wide)["data"]["object"]["amount"] == 2**64  # kept exactly

        again = await run(settings, "stripe", Window(WINDOW.since, NOW - timedelta(seconds=1)))
        assert (again.tally.present, again.tally.recovered) == (7, 0)


async def test_paddle_times_without_a_zone_and_missing_ids(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    when = NOW - timedelta(minutes=30)
    zoneless = paddle_event(1, when) | {"occurred_at": "2026-11-30T10:00:00"}
    no_id = {k: v for k, v in paddle_event(2, when).items() if k != "event_id"}
    async with running_apis() as apis:
        apis.paddle_events = [paddle_event(3, when)]
        page = {
            "data": [paddle_event(3, when), zoneless, no_id],
            "meta": {"pagination": {"has_more": False, "next": None}},
        }
        apis.faults = [raw(orjson.dumps(page))]
        report = await run(with_api(config(database_url, nats_url), apis.url), "paddle")
    assert (report.tally.recovered, report.tally.failed) == (3, 0), report.errors
    classes = await parked(db, "paddle")
    assert classes[zoneless["event_id"]] == "BACKFILL_ITEM_TIME_INVALID"
    assert sorted(classes.values()) == ["BACKFILL_ITEM_ID_INVALID", "BACKFILL_ITEM_TIME_INVALID"]


async def test_a_paddle_next_cursor_that_is_no_usable_id_is_not_followed(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    """`meta.pagination.next`'s `after` is held to an entry id's rules (here: longer
    than an event id may be): it is neither sent back nor saved; the page's last id
    is the cursor instead, and every event is recovered."""
    when = NOW - timedelta(minutes=30)
    events = [paddle_event(n, when) for n in (1, 2, 3)]
    async with running_apis() as apis:
        apis.paddle_events = events
        first = {
            "data": [events[2], events[1]],
            "meta": {
                "pagination": {"has_more": True, "next": f"{apis.url}/events?after={'e' * 5000}"}
            },
        }
        apis.faults = [raw(orjson.dumps(first))]
        report = await run(with_api(config(database_url, nats_url), apis.url), "paddle")
    assert (report.tally.recovered, report.tally.failed) == (3, 0), report.errors
    assert f"after={events[1]['event_id']}" in apis.requests[1]
    assert all("eeeee" not in r for r in apis.requests)


def gh_delivery(n: int, body: bytes, when: datetime) -> GitHubDelivery:
    guid = f"5847{n:04d}-b361-11eb-836d-0e4f3503ccbe"
    headers = {
        "X-GitHub-Delivery": guid,
        "X-GitHub-Event": "issues",
        "X-Hub-Signature-256": f"sha256={vectors.github_sha256(SECRETS['github'], body)}",
        "content-type": "application/json",
    }
    return GitHubDelivery(1000 + n, guid, "issues", when, headers, body)


async def test_github_entries_without_a_time_or_an_id(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    """A delivery listed without `delivered_at` is fetched, recorded and parked; one
    without a numeric id cannot be fetched: counted failed with one line. A payload
    with an integer wider than 64 bits is kept exactly and parked."""
    when = NOW - timedelta(minutes=30)
    good = gh_delivery(1, orjson.dumps({"action": "opened", "n": 1}), when)
    timeless = gh_delivery(2, orjson.dumps({"action": "opened", "n": 2}), when)
    wide = gh_delivery(3, b'{"action":"opened","n":18446744073709551616}', when)
    async with running_apis() as apis:
        apis.github = [good, timeless, wide]
        listing = [apis._gh_item(d) for d in (good, timeless, wide)]
        del listing[1]["delivered_at"]
        listing.append(apis._gh_item(good) | {"id": "not-a-number", "guid": "other"})
        apis.faults = [raw(orjson.dumps(listing))]
        report = await run(with_api(config(database_url, nats_url), apis.url), "github")
    assert (report.tally.recovered, report.tally.failed) == (3, 1)
    assert len(report.errors) == 1 and "numeric id" in report.errors[0]
    assert await parked(db, "github") == {
        timeless.guid: "BACKFILL_ITEM_TIME_INVALID",
        wide.guid: "BACKFILL_ITEM_UNENCODABLE",
    }
    body = await db.fetchval("SELECT body FROM processed_webhooks WHERE event_id = $1", wide.guid)
    assert bytes(body) == wide.body


async def test_an_entry_over_max_body_bytes_is_parked(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    """`http.max_body_bytes` holds for backfill too: a longer event is recorded and
    parked, never published."""
    when = NOW - timedelta(minutes=30)
    big = stripe_event(1, when) | {"id": "evt_big", "description": "x" * 70_000}
    async with running_apis() as apis:
        apis.stripe_events = [big, stripe_event(2, when)]
        report = await run(with_api(config(database_url, nats_url), apis.url), "stripe")
    assert report.tally.recovered == 2
    assert await parked(db, "stripe") == {"evt_big": "BACKFILL_ITEM_TOO_LARGE"}


async def test_a_page_that_keeps_failing_is_skipped_after_n_passes(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    """A page that is a list fails its pass with one line, twice; the third pass skips
    the run (counted for the alert) and completes; the next pass starts afresh instead
    of failing on that page for ever."""
    listed_page = raw(orjson.dumps([stripe_event(1, NOW - timedelta(minutes=5))]))
    async with running_apis() as apis:
        apis.stripe_events = [stripe_event(n, NOW - timedelta(minutes=50 - n)) for n in range(3)]
        settings = with_api(config(database_url, nats_url), apis.url, api_page_attempts=3)
        metrics = Metrics()
        for attempt in (1, 2):
            apis.faults = [listed_page]
            with pytest.raises(ProviderApiAnswerInvalid, match="not the listing's object") as e:
                await run(settings, "stripe", metrics=metrics)
            assert "\n" not in str(e.value)
            failed = await db.fetchval("SELECT failed_passes FROM backfill_progress")
            assert failed == attempt
        apis.faults = [listed_page]
        report = await run(settings, "stripe", metrics=metrics)
        assert len(report.skipped) == 1 and "failed 3 passes" in report.skipped[0]
        assert metrics.backfill_pages_skipped_total.get(provider="stripe") == 1
        row = await db.fetchrow("SELECT skipped_at, last_error FROM backfill_progress")
        assert row is not None and row["skipped_at"] is not None
        assert "ProviderApiAnswerInvalid" in row["last_error"]

        later = Window(WINDOW.since + timedelta(seconds=1), NOW)
        report = await run(settings, "stripe", later, metrics)
        assert not report.continued  # the skipped run is not continued
        assert report.tally.recovered == 3


async def test_a_delivery_that_cannot_be_fetched_fails_its_page_not_the_event(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    """A GitHub delivery whose fetch keeps failing (500 until the pass's time is up) is
    not counted away as failed: its page fails, is counted on the progress row, and is
    read again by the next pass, which recovers it."""
    when = NOW - timedelta(minutes=30)
    delivery = gh_delivery(1, orjson.dumps({"action": "opened", "n": 1}), when)
    async with running_apis() as apis:
        apis.github = [delivery]
        settings = with_api(config(database_url, nats_url), apis.url, api_max_pass_s=2)
        apis.fail_from = (2, "500")  # the listing answers; every fetch after it fails
        with pytest.raises(ProviderApiUnavailable):
            await run(settings, "github")
        assert await db.fetchval("SELECT failed_passes FROM backfill_progress") == 1
        apis.fail_from = None
        apis.faults.clear()
        report = await run(settings, "github")
    assert report.continued and report.tally.recovered == 1
    assert await db.fetchval("SELECT failed_passes FROM backfill_progress") == 0
