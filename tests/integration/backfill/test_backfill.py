"""`gateway backfill` against local stand-ins of the providers' APIs, a real database and
a real JetStream: the gateway was down while the provider gave up; backfill recovers
exactly the missing events, once, and a second run recovers nothing."""

from __future__ import annotations

import asyncio
import copy
import hashlib
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import asyncpg
import orjson
import pytest

from gateway import settings as settings_mod
from gateway.adapters.postgres import backfill as progress
from gateway.adapters.provider_api import Fetched, Listed, Page
from gateway.backfill.run import BackfillReport, backfill
from gateway.core.backfill.decisions import Window, make_window
from gateway.errors import ProviderApiAuth, ProviderApiRefused
from gateway.settlement.parts import SettlementParts
from gateway.wiring.backfill import backfill_parts
from tests.support import vectors
from tests.support.deliveries import deliver
from tests.support.gateway import SECRETS, config, running_server
from tests.support.provider_apis import (
    API_KEY,
    HOOK_ID,
    REPO,
    GitHubDelivery,
    ProviderApis,
    paddle_event,
    running_apis,
    stand_in_keys,
    stripe_event,
)
from tests.support.services import stream_messages, wait_until
from tests.support.settlement import (
    fetch,
    merchant_balance,
    open_merchant,
    running_worker,
    settlement_sections,
)
from tests.support.stub import Stub

ENV = {"PROVIDER_API_KEY": API_KEY}
NOW = datetime.now(UTC).replace(microsecond=0)
OUTAGE = Window(NOW - timedelta(hours=2), NOW)


def with_api(doc: dict[str, Any], url: str) -> settings_mod.Settings:
    doc = copy.deepcopy(doc)
    p = doc["providers"]
    for name in ("stripe", "paddle"):
        p[name] |= stand_in_keys(url)
    p["github"] |= stand_in_keys(url) | {"repo": REPO, "hook_id": HOOK_ID}
    return settings_mod.parse(doc, env=ENV)


async def run(
    settings: settings_mod.Settings, name: str, window: Window = OUTAGE, **kw: Any
) -> BackfillReport:
    async with backfill_parts(settings, name) as parts:
        return await backfill(parts, window, **kw)


async def test_stripe_outage_is_recovered_once(
    database_url: str, nats_url: str, stub: Stub, redis_url: str
) -> None:
    """Six payments in the hour the gateway was down, three reached it: backfill (through
    a 429 with Retry-After and a 500, three pages) records and publishes the other three
    marked backfill, and the settlement worker settles each of the six exactly once; a
    second run recovers nothing and settles nothing more."""
    doc = config(database_url, nats_url, **settlement_sections(stub.url, redis_url))
    async with (
        running_apis() as apis,
        running_server(doc) as gw,
        running_worker(doc) as worker,
    ):
        await open_merchant(worker, "m_1")
        events = [stripe_event(n, NOW - timedelta(minutes=90 - 10 * n)) for n in range(6)]
        apis.stripe_events = events
        for event in events[::2]:  # these got through before the outage ended
            d = deliver("stripe", event["id"], body=orjson.dumps(event))
            assert (
                await gw.client.post(d.path, content=d.body, headers=d.headers)
            ).status_code == 200
        settings = with_api(doc, apis.url)
        apis.faults = ["429", "500"]
        report = await run(settings, "stripe")
        t = report.tally
        assert (t.fetched, t.present, t.recovered, t.failed) == (6, 3, 3, 0)
        assert report.unpublished == 0
        assert any("starting_after" in r for r in apis.requests)  # it paginated
        rows = await fetch(
            database_url,
            "SELECT event_id, source, body FROM processed_webhooks "
            "WHERE provider = 'stripe' ORDER BY event_id",
        )
        assert [(r["event_id"], r["source"]) for r in rows] == [
            (e["id"], "live" if i % 2 == 0 else "backfill") for i, e in enumerate(events)
        ]
        assert orjson.loads(rows[1]["body"]) == events[1]  # the event object, as a webhook
        messages = await wait_until(lambda: _stripe_messages(nats_url, 6), timeout_s=10)
        recovered = {
            h["Gateway-Event-Id"] for _, h, _ in messages if h.get("Gateway-Source") == "backfill"
        }
        assert recovered == {e["id"] for e in events[1::2]}
        assert {h["Nats-Msg-Id"] for _, h, _ in messages} == {f"stripe:{e['id']}" for e in events}

        # Each of the six payments, live or recovered, settles exactly once.
        await wait_until(lambda: _settled(database_url, 6), timeout_s=20)
        await wait_until(lambda: _consumed(worker), timeout_s=10)
        once = {e["data"]["object"]["id"]: 1 for e in events}
        total = sum(e["data"]["object"]["amount_received"] for e in events)
        assert await _transfers(database_url) == once
        assert await merchant_balance(worker, "m_1") == total
        settled = await fetch(database_url, "SELECT state FROM settlements")
        assert [r["state"] for r in settled] == ["settled"] * 6

        again = await run(
            settings, "stripe", Window(OUTAGE.since, OUTAGE.until - timedelta(seconds=1))
        )
        assert (again.tally.fetched, again.tally.present, again.tally.recovered) == (6, 6, 0)
        await asyncio.sleep(1.0)  # room for a wrong second settlement to land
        assert await merchant_balance(worker, "m_1") == total
        assert await _transfers(database_url) == once
        assert await _consumed(worker)


async def _settled(dsn: str, count: int) -> bool:
    rows = await fetch(dsn, "SELECT count(*) AS n FROM settlements WHERE state = 'settled'")
    return int(rows[0]["n"]) >= count


async def _transfers(dsn: str) -> dict[str, int]:
    """Ledger transfers by settlement id (a payment intent)."""
    rows = await fetch(
        dsn, "SELECT settlement_id, count(*) AS n FROM ledger_transfers GROUP BY settlement_id"
    )
    return {r["settlement_id"]: int(r["n"]) for r in rows}


async def _consumed(parts: SettlementParts) -> bool:
    js = parts.broker._js
    if js is None:
        return False
    info = await js.consumer_info("WEBHOOKS", "settlement")
    return bool(info.num_pending == 0 and info.num_ack_pending == 0)


async def _stripe_messages(nats_url: str, count: int) -> list[Any]:
    found = [m for m in await stream_messages(nats_url) if m[0].startswith("webhooks.stripe.")]
    return found if len(found) >= count else []


async def test_bad_credentials_stop_with_one_line(database_url: str, nats_url: str) -> None:
    """A 401 is not retried: the run stops with an error naming api_key_env."""
    async with running_apis() as apis:
        apis.stripe_events = [stripe_event(1, NOW - timedelta(minutes=5))]
        doc = config(database_url, nats_url)
        settings = with_api(doc, apis.url)
        apis.faults = ["401"]
        with pytest.raises(ProviderApiAuth, match="api_key_env"):
            await run(settings, "stripe")
        assert len(apis.requests) == 1


async def _killed_after_one_page(
    apis: ProviderApis, database_url: str, nats_url: str
) -> settings_mod.Settings:
    """Five events; a run over `OUTAGE` dies after its first page (the API starts
    refusing it), leaving its progress row unfinished; the API answers again."""
    apis.stripe_events = [stripe_event(n, NOW - timedelta(minutes=60 - n)) for n in range(5)]
    settings = with_api(config(database_url, nats_url), apis.url)
    apis.fail_from = (2, "401")
    with pytest.raises(ProviderApiAuth):
        await run(settings, "stripe")
    apis.fail_from = None
    return settings


async def test_a_killed_run_continues_from_its_cursor(database_url: str, nats_url: str) -> None:
    """The run dies after its first page (the API starts refusing it); run again, it
    continues from the saved cursor, not from the newest event, and recovers the rest."""
    async with running_apis() as apis:
        settings = await _killed_after_one_page(apis, database_url, nats_url)
        first = await fetch(database_url, "SELECT count(*) AS n FROM processed_webhooks")
        assert first[0]["n"] == 2
        apis.requests.clear()
        report = await run(settings, "stripe", Window(OUTAGE.since + timedelta(minutes=1), NOW))
        assert report.continued and report.continued[0].since == OUTAGE.since
        assert "starting_after=evt_bf0003" in apis.requests[0]
        assert report.tally.recovered == 3
        rows = await fetch(database_url, "SELECT count(*) AS n FROM processed_webhooks")
        assert rows[0]["n"] == 5


async def test_a_live_runs_row_is_not_continued(database_url: str, nats_url: str) -> None:
    """A run advancing its window at this moment (its session holds the row) is not taken
    for one that died: a second run reads its own window whole; once the first run's
    session is gone, the next run continues the row from its cursor."""
    async with running_apis() as apis:
        settings = await _killed_after_one_page(apis, database_url, nats_url)
        conn = await asyncpg.connect(database_url)
        try:
            live = progress.Claims(conn, "stripe")
            # The same window in another offset: the same row, held.
            east = timezone(timedelta(hours=2))
            await live.take(Window(OUTAGE.since.astimezone(east), OUTAGE.until.astimezone(east)))
            report = await run(settings, "stripe", Window(OUTAGE.since + timedelta(minutes=1), NOW))
            assert not report.continued
            t = report.tally
            assert (t.fetched, t.present, t.recovered) == (5, 2, 3)
        finally:
            await conn.close()
        apis.requests.clear()
        report = await run(settings, "stripe", Window(OUTAGE.since + timedelta(minutes=2), NOW))
        assert report.continued and report.continued[0].since == OUTAGE.since
        assert "starting_after=evt_bf0003" in apis.requests[0]


async def test_a_run_holds_its_row_while_it_goes(database_url: str, nats_url: str) -> None:
    """A run part-way through its window (its first page saved, the API slow): a second
    run started then reads its own window whole, and the first is not continued."""
    async with running_apis(page_size=3) as apis:
        apis.stripe_events = [stripe_event(n, NOW - timedelta(minutes=50 - n)) for n in range(12)]
        settings = with_api(config(database_url, nats_url), apis.url)
        apis.delay_s = 0.3
        first = asyncio.create_task(run(settings, "stripe"))
        try:

            async def saved_a_page() -> bool:
                rows = await fetch(database_url, "SELECT pages FROM backfill_progress")
                return bool(rows) and rows[0]["pages"] >= 1

            await wait_until(saved_a_page, timeout_s=10)
            second = await run(settings, "stripe", Window(OUTAGE.since + timedelta(minutes=1), NOW))
        finally:
            done = await first
        assert not second.continued
        assert second.tally.fetched == 12
        assert done.tally.recovered + second.tally.recovered == 12
        rows = await fetch(database_url, "SELECT count(*) AS n FROM processed_webhooks")
        assert rows[0]["n"] == 12


async def test_two_runs_at_once_record_each_event_once(database_url: str, nats_url: str) -> None:
    """The gate, not a lock, keeps concurrent runs apart: together they recover each
    missing event exactly once."""
    async with running_apis(page_size=3) as apis:
        apis.stripe_events = [stripe_event(n, NOW - timedelta(minutes=50 - n)) for n in range(12)]
        settings = with_api(config(database_url, nats_url), apis.url)
        a, b = await asyncio.gather(
            run(settings, "stripe"),
            run(settings, "stripe", Window(OUTAGE.since, NOW - timedelta(seconds=1))),
        )
        assert a.tally.recovered + b.tally.recovered == 12
        assert a.tally.present + b.tally.present == 12
        rows = await fetch(database_url, "SELECT count(*) AS n FROM processed_webhooks")
        assert rows[0]["n"] == 12


def gh_delivery(n: int, payload: dict[str, Any], when: datetime) -> GitHubDelivery:
    body = orjson.dumps(payload)  # GitHub sends compact JSON, UTF-8
    guid = f"5847{n:04d}-b361-11eb-836d-0e4f3503ccbe"
    headers = {
        "Accept": "*/*",
        "User-Agent": "GitHub-Hookshot/b8c71d8",
        "X-GitHub-Delivery": guid,
        "X-GitHub-Event": "issues",
        "X-GitHub-Hook-ID": str(HOOK_ID),
        "X-Hub-Signature-256": f"sha256={vectors.github_sha256(SECRETS['github'], body)}",
        "content-type": "application/json",
    }
    return GitHubDelivery(1000 + n, guid, "issues", when, headers, body)


async def test_github_recovers_the_exact_bytes(database_url: str, nats_url: str) -> None:
    """A missing GitHub delivery is recorded with the very bytes the webhook carried
    (its recorded signature proves them), so its body digest is the webhook's: a
    captured copy replayed under a forged delivery id is still a duplicate."""
    doc = config(database_url, nats_url)
    async with running_apis() as apis, running_server(doc) as gw:
        payloads = [
            {"action": "opened", "issue": {"number": n, "title": f"Zahlung fällig {n} ✓"}}
            for n in range(4)
        ]
        apis.github = [
            gh_delivery(n, p, NOW - timedelta(minutes=30 - n)) for n, p in enumerate(payloads)
        ]
        live = apis.github[0]
        d = deliver("github", live.guid, "issues", body=live.body)
        assert (await gw.client.post(d.path, content=d.body, headers=d.headers)).json()[
            "status"
        ] == "accepted"
        report = await run(with_api(doc, apis.url), "github")
        t = report.tally
        assert (t.fetched, t.present, t.recovered, t.inexact) == (4, 1, 3, 0)
        missing = apis.github[2]
        rows = await fetch(
            database_url,
            "SELECT body, body_sha256, source, headers::text AS h "
            "FROM processed_webhooks WHERE event_id = $1",
            missing.guid,
        )
        assert bytes(rows[0]["body"]) == missing.body
        assert bytes(rows[0]["body_sha256"]) == hashlib.sha256(missing.body).digest()
        assert rows[0]["source"] == "backfill"
        assert "signature" not in rows[0]["h"].lower()
        forged = deliver("github", "forged-guid", "issues", body=missing.body)
        answer = await gw.client.post(forged.path, content=forged.body, headers=forged.headers)
        assert answer.json()["status"] == "duplicate"


async def test_paddle_window_and_pages(database_url: str, nats_url: str) -> None:
    """Paddle has no time filter: events outside the window are skipped and the listing
    stops at the first page that reaches past --since."""
    async with running_apis() as apis:
        apis.paddle_events = [
            paddle_event(n, NOW - timedelta(minutes=200 - 20 * n)) for n in range(10)
        ]
        settings = with_api(config(database_url, nats_url), apis.url)
        window = make_window(NOW - timedelta(minutes=100), NOW - timedelta(minutes=30), [], NOW)
        report = await run(settings, "paddle", window)
        inside = {
            e["event_id"]
            for e in apis.paddle_events
            if window.holds(
                datetime.fromisoformat(e["event_id"] and e["occurred_at"].replace("Z", "+00:00"))
            )
        }
        assert report.tally.recovered == len(inside) == 4
        assert len(apis.requests) < 5  # stopped early, not the whole history
        rows = await fetch(database_url, "SELECT event_id, subject FROM processed_webhooks")
        assert {r["event_id"] for r in rows} == inside
        assert {r["subject"] for r in rows} == {"webhooks.paddle.transaction.completed"}


class _LoopingSource:
    """An API that answers every page with the same cursor, as a broken one might."""

    def __init__(self) -> None:
        self.pages = 0

    async def page(self, cursor: str | None, window: Window) -> Page:
        self.pages += 1
        when = NOW - timedelta(minutes=30)
        return Page([Listed(f"evt_loop_{self.pages}", "invoice.paid", when)], "cursor-1")

    async def fetch(self, item: Listed) -> Fetched:
        raise ProviderApiRefused("not needed: a dry run fetches nothing")

    async def close(self) -> None:
        return None


async def test_a_cursor_the_api_gave_before_stops_the_run(database_url: str, nats_url: str) -> None:
    """A page cursor handed back again would read the same pages for ever: the run stops
    with one clear error after the repeat instead."""
    async with running_apis() as apis:
        settings = with_api(config(database_url, nats_url), apis.url)
        async with backfill_parts(settings, "stripe") as parts:
            looping = _LoopingSource()
            parts.source = looping
            with pytest.raises(ProviderApiRefused, match="cursor it had already given"):
                await backfill(parts, OUTAGE, dry_run=True)
    assert looping.pages == 2
