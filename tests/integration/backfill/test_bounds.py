"""A backfill pass is bounded: pages per pass, time per pass, bytes and time per
answer; and its publisher takes no message the server's `max_payload` would refuse by
closing the connection."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import nats
import pytest

from gateway import settings as settings_mod
from gateway.backfill.run import BackfillReport, backfill
from gateway.core.backfill.decisions import Window
from gateway.errors import ProviderApiAnswerTooLarge, ProviderApiUnavailable
from gateway.wiring.backfill import backfill_parts
from tests.support.gateway import config
from tests.support.nats import NatsServer
from tests.support.provider_apis import (
    API_KEY,
    running_apis,
    stand_in_keys,
    streamed,
    stripe_event,
)

NOW = datetime.now(UTC).replace(microsecond=0)
WINDOW = Window(NOW - timedelta(hours=2), NOW)
#: A guard around runs that, unbounded, would go on for ever: the test fails, not hangs.
GUARD_S = 60.0


def stripe_settings(doc: dict[str, Any], url: str, **keys: Any) -> settings_mod.Settings:
    doc = copy.deepcopy(doc)
    doc["providers"]["stripe"] |= stand_in_keys(url) | keys
    return settings_mod.parse(doc, env={"PROVIDER_API_KEY": API_KEY})


async def run(settings: settings_mod.Settings, window: Window = WINDOW) -> BackfillReport:
    async with backfill_parts(settings, "stripe") as parts:
        return await asyncio.wait_for(backfill(parts, window), GUARD_S)


async def test_a_fresh_cursor_on_every_page_stops_at_the_page_bound(
    database_url: str, nats_url: str
) -> None:
    """The API never ends its listing: the pass stops after `api_max_pages` pages, its
    cursor saved, and the next pass continues from it (bounded again)."""
    async with running_apis(endless_at=NOW - timedelta(minutes=1)) as apis:
        settings = stripe_settings(config(database_url, nats_url), apis.url, api_max_pages=5)
        report = await run(settings)
        assert (report.stopped, report.pages, len(apis.requests)) == ("api_max_pages", 5, 5)
        assert report.tally.recovered == 5
        again = await run(settings, Window(WINDOW.since + timedelta(seconds=1), NOW))
        assert again.continued and again.stopped == "api_max_pages"
        assert "starting_after=evt_endless_5" in apis.requests[5]
        assert len(apis.requests) == 10


async def test_a_trickled_page_times_out(database_url: str, nats_url: str) -> None:
    """A page sent a byte every half second never completes within `api_timeout_s`; its
    retries end with the pass's `api_max_pass_s`, and the run stops with one line."""
    async with running_apis() as apis:
        apis.faults = [streamed(1000, b" ", delay_s=0.5) for _ in range(10)]
        settings = stripe_settings(
            config(database_url, nats_url), apis.url, api_timeout_s=1, api_max_pass_s=4
        )
        started = time.monotonic()
        with pytest.raises(ProviderApiUnavailable, match=r"api_timeout_s|tries") as stopped:
            await run(settings)
        took_s = time.monotonic() - started
    assert "\n" not in str(stopped.value)
    assert took_s < GUARD_S  # bounded (about api_max_pass_s), not for ever
    print(f"trickled page: stopped after {took_s:.1f} s, {len(apis.requests)} requests")


async def test_an_answer_past_the_byte_cap_is_refused_as_it_streams(
    database_url: str, nats_url: str
) -> None:
    """A 100 MB page without Content-Length, a megabyte every 20 ms: reading stops at
    `api_max_answer_bytes` (here 4 MiB), long before the stand-in has sent it all (it
    goes on sending into a closed connection: the count is taken at the refusal)."""
    sent: list[int] = []
    async with running_apis() as apis:
        apis.faults = [streamed(100, b" " * 1_000_000, delay_s=0.02, sent=sent)]
        settings = stripe_settings(
            config(database_url, nats_url), apis.url, api_max_answer_bytes=4 * 1024 * 1024
        )
        with pytest.raises(ProviderApiAnswerTooLarge, match="api_max_answer_bytes"):
            await run(settings)
        at_refusal = sum(sent)
    assert at_refusal < 30_000_000, f"{at_refusal} bytes had been sent"


async def test_a_declared_length_past_the_cap_is_not_read(database_url: str, nats_url: str) -> None:
    async with running_apis() as apis:
        apis.stripe_events = [stripe_event(n, NOW - timedelta(minutes=9 - n)) for n in range(2)]
        settings = stripe_settings(
            config(database_url, nats_url), apis.url, api_max_answer_bytes=100
        )
        with pytest.raises(ProviderApiAnswerTooLarge, match="declares"):
            await run(settings)


SERVER_MAX_PAYLOAD = 16_384


@pytest.fixture
def small_nats() -> Iterator[NatsServer]:
    """A private nats-server that takes at most 16 KiB a message."""
    server = NatsServer(max_payload=SERVER_MAX_PAYLOAD)
    server.start()
    yield server
    server.cleanup()


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


async def test_the_publisher_parks_what_the_server_would_refuse(
    database_url: str, small_nats: NatsServer, db: asyncpg.Connection
) -> None:
    """A recovered event within `http.max_body_bytes` but past the server's own
    `max_payload` is parked as the relay parks it, never sent: the connection stays up
    and the next recovered event is published by the backfill itself."""
    nc = await nats.connect(small_nats.url)
    try:
        await nc.jetstream().add_stream(name="WEBHOOKS", subjects=["webhooks.>", "events.>"])
    finally:
        await nc.close()
    when = NOW - timedelta(minutes=30)
    big = stripe_event(2, when) | {"description": "x" * 30_000}  # the newest: first
    small = stripe_event(1, when - timedelta(minutes=1))
    async with running_apis() as apis:
        apis.stripe_events = [big, small]
        settings = stripe_settings(config(database_url, small_nats.url), apis.url)
        report = await run(settings)
    assert report.tally.recovered == 2
    assert report.unpublished == 0  # the small one went out after the big one was held back
    rows = await db.fetch("SELECT stage, event_id, error_class FROM dlq_webhooks")
    assert [(r["stage"], r["event_id"], r["error_class"]) for r in rows] == [
        ("publish", big["id"], "PAYLOAD_TOO_LARGE")
    ]
    parked_at = await db.fetchval(
        "SELECT publish_parked_at FROM processed_webhooks WHERE event_id = $1", big["id"]
    )
    assert parked_at is not None  # the relay's walk passes it
