"""The overview against a real database (and a real NATS for the consumer's backlog):
rows of every kind are seeded at known ages, and the page and the API must show the
same figures; with NATS down the page still answers, saying "unavailable" and why."""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig

from gateway.core.console.roles import Role
from gateway.settings import parse
from gateway.settings.sections import NatsSettings
from gateway.wiring.console import LazyNats
from tests.support.console import ConsoleHarness
from tests.support.nats import NatsServer
from tests.support.openapi import check_answer
from tests.support.services import free_port

SENDERS = {
    "providers": {
        "stripe": {"scheme": "stripe", "secrets": ["whsec_test"]},
        "adyen": {"scheme": "stripe", "secrets": ["whsec_test2"]},
        "github": {"scheme": "github", "secrets": ["gh_test"]},
    },
    "services": {"billing": {"token": "billing-token", "subjects": ["events.billing.>"]}},
}


#: Only a guard against a page that never answers, never a measure of how fast it does.
HANG_GUARD_S = 30.0


@dataclass(frozen=True)
class Stopped:
    """The console's clock, stood still at `t0`: the database's now() when the test
    began, to the second, so every age the console works out is exact and the rows are
    also where the database's own clock (the outbox's lag) expects them."""

    t0: datetime

    def ago(self, **delta: float) -> datetime:
        return self.t0 - timedelta(**delta)


def hour_of(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


async def db_now(console: ConsoleHarness) -> datetime:
    now: datetime = await console.fetchval("SELECT now()")
    return now.astimezone(UTC)


async def configure(console: ConsoleHarness) -> Stopped:
    """Stop the console's clock at the database's now and configure the senders."""
    senders = parse(
        {"database": {"url": console.dsn}, "nats": {"url": "nats://x:1"}, **SENDERS}, env={}
    )
    console.deps.settings = replace(
        console.settings, providers=senders.providers, services=senders.services
    )
    clock = Stopped((await db_now(console)).replace(microsecond=0))
    console.deps.now = lambda: clock.t0
    return clock


async def event(console: ConsoleHarness, provider: str, at: datetime, subject: str | None) -> int:
    return int(
        await console.fetchval(
            "INSERT INTO processed_webhooks (provider, event_id, event_type, subject, body,"
            " received_at) VALUES ($1, gen_random_uuid()::text, 't', $2, '{}', $3) RETURNING id",
            provider,
            subject,
            at,
        )
    )


async def dead_letter(
    console: ConsoleHarness, stage: str, first_failed: datetime, resolved: datetime | None = None
) -> int:
    return int(
        await console.fetchval(
            "INSERT INTO dlq_webhooks (stage, provider, event_id, error_class, error_message,"
            " payload, received_at, first_failed_at, last_failed_at, is_resolved, resolved_at)"
            " VALUES ($1, 'stripe', gen_random_uuid()::text, 'SCHEMA_INVALID', 'bad', '{}',"
            " $2, $2, $2, $3, $4) RETURNING id",
            stage,
            first_failed,
            resolved is not None,
            resolved,
        )
    )


async def job(console: ConsoleHarness, state: str, items: list[str]) -> int:
    job_id = int(
        await console.fetchval(
            "INSERT INTO replay_jobs (kind, state, created_by, request, total)"
            " VALUES ('dlq', $1, 'console:operator', '{}', $2) RETURNING id",
            state,
            len(items),
        )
    )
    for position, item_state in enumerate(items):
        await console.fetchval(
            "INSERT INTO replay_job_items (job_id, position, dlq_id, state)"
            " VALUES ($1, $2, $3, $4)",
            job_id,
            position,
            position + 1,
            item_state,
        )
    return job_id


async def seed(console: ConsoleHarness, clock: Stopped) -> dict[str, Any]:
    """One of every kind of row, at known ages; returns the figures the overview owes."""
    ago = clock.ago
    stripe_newest = await event(console, "stripe", ago(minutes=1), "webhooks.stripe.t")
    await event(console, "stripe", ago(hours=2), None)
    await event(console, "stripe", ago(days=3), None)
    await event(console, "adyen", ago(days=3), None)  # silent: nothing for 3 days
    billing = await event(console, "service:billing", ago(minutes=10), "events.billing.t")
    # Not configured: recorded, but the overview lists configured senders only.
    await event(console, "legacy", ago(minutes=1), None)

    await dead_letter(console, "ingest", ago(minutes=2))
    await dead_letter(console, "ingest", ago(minutes=30))
    await dead_letter(console, "publish", ago(minutes=50))
    await dead_letter(console, "settlement", ago(hours=5))
    await dead_letter(console, "settlement", ago(hours=30))
    oldest = await dead_letter(console, "settlement", ago(days=3))
    await dead_letter(console, "settlement", ago(hours=4), resolved=ago(hours=3))
    await dead_letter(console, "settlement", ago(hours=4), resolved=ago(hours=3))
    await dead_letter(console, "ingest", ago(days=2), resolved=ago(minutes=90))

    await console.fetchval(
        "INSERT INTO order_applied (provider, order_key, applied_seq, held_seq, held_dlq_id,"
        " hold_reason, held_at) VALUES ('stripe', 'pi_1', 3, 4, 1, 'SCHEMA_INVALID', $1),"
        " ('stripe', 'pi_2', 1, 2, 2, 'SCHEMA_INVALID', $2), ('stripe', 'pi_3', 9, NULL, NULL,"
        " NULL, NULL)",
        ago(minutes=20),
        ago(minutes=5),
    )
    running = await job(console, "running", ["replayed", "replayed", "failed", "pending"])
    await job(console, "done", ["replayed"])
    planned = await job(console, "planned", ["pending", "pending"])

    hours = {hour_of(ago(hours=h)): [0, 0] for h in range(24)}
    hours[hour_of(ago(minutes=2))][0] += 1
    hours[hour_of(ago(minutes=30))][0] += 1
    hours[hour_of(ago(minutes=50))][0] += 1
    hours[hour_of(ago(hours=5))][0] += 1
    hours[hour_of(ago(hours=4))][0] += 2
    hours[hour_of(ago(hours=3))][1] += 2
    hours[hour_of(ago(minutes=90))][1] += 1
    return {
        "stripe_newest": stripe_newest,
        "billing": billing,
        "oldest": oldest,
        "running": running,
        "planned": planned,
        "hours": hours,
    }


def figure(html: str, ident: str) -> str:
    found = re.search(rf'id="{ident}"[^>]*>(.*?)</', html, re.S)
    assert found, f"no element #{ident} on the page"
    return found.group(1).strip()


def settlement(html: str) -> str:
    """The settlement backlog's figure as read: its text, tags left out."""
    found = re.search(r'<dd id="settlement">(.*?)</dd>', html, re.S)
    assert found, "no settlement figure on the page"
    return " ".join(re.sub(r"<[^>]+>", " ", found.group(1)).split())


def provider_row(html: str, name: str) -> str:
    found = re.search(rf'<tr[^>]*data-provider="{re.escape(name)}">.*?</tr>', html, re.S)
    assert found, f"no row for {name}"
    return found.group(0)


async def test_the_page_and_the_api_show_the_seeded_figures(console: ConsoleHarness) -> None:
    clock = await configure(console)
    seeded = await seed(console, clock)
    viewer = console.client(Role.VIEWER)

    page = await viewer.get("/console/")
    assert page.status_code == 200
    html = page.text
    assert figure(html, "open-total") == "6"
    for stage, n in (("settlement", 3), ("ingest", 2), ("publish", 1)):
        assert re.search(rf">{stage}</a></th><td class=\"num\">{n}</td>", html), stage
    assert (figure(html, "added-5m"), figure(html, "added-1h"), figure(html, "added-24h")) == (
        "1",
        "3",
        "6",
    )
    oldest = re.search(r'id="oldest-open"[^>]*>(.*?)</dd>', html, re.S)
    assert oldest is not None
    assert f"#{seeded['oldest']}" in oldest.group(1) and 'class="age">3 d<' in oldest.group(1)
    assert 'id="oldest-open" class="highlighted"' in html  # older than the 1 h alert
    assert figure(html, "outbox-pending") == "2"
    assert figure(html, "held-count") == "2"
    assert "the oldest for 20 min" in html
    assert "unavailable" in figure(html, "settlement")  # no NATS given to this console

    assert 'class="highlighted silent"' in provider_row(html, "adyen")
    assert "<td>3 d</td>" in provider_row(html, "adyen")
    assert "none recorded" in provider_row(html, "github")
    assert "silent" in provider_row(html, "github")
    stripe = provider_row(html, "stripe")
    assert "highlighted" not in stripe and "receiving" in stripe and "1 min" in stripe
    assert f"/console/events/{seeded['stripe_newest']}" in stripe
    assert "receiving" in provider_row(html, "service:billing")
    assert "legacy" not in html

    assert f'href="/console/replays/{seeded["running"]}"' in html
    assert f'href="/console/replays/{seeded["planned"]}"' in html
    assert 'value="3" aria-label="Job' in html  # 3 of the running job's 4 items done

    # The chart's table: one row per hour, net growth and its two parts.
    for hour, (opened, resolved) in seeded["hours"].items():
        label = hour.strftime("%H:00")
        row = re.search(
            rf'<tr[^>]*><th scope="row">{label}</th><td>(-?\d+)</td><td>(.*?)</td>', html
        )
        assert row, label
        assert row.groups() == (str(opened - resolved), f"{opened} opened, {resolved} resolved")
    assert 'class="chart-threshold"' in html and "more than 10 in 5 min (120 an hour)" in html

    api = await viewer.get("/console/api/v1/stats/overview")
    answered = await db_now(console)
    assert api.status_code == 200
    doc = api.json()
    dlq = doc["dead_letters"]
    assert dlq["open_total"] == 6
    assert dlq["open_by_stage"] == {"settlement": 3, "ingest": 2, "publish": 1}
    assert dlq["added"] == {"5m": 1, "1h": 3, "24h": 6}
    assert dlq["oldest_open"]["id"] == seeded["oldest"]
    assert dlq["oldest_open"]["age_s"] == 3 * 86_400
    hours = {
        datetime.fromisoformat(h["hour"]): [h["opened"], h["resolved"]]
        for h in dlq["net_growth_per_hour"]
    }
    assert hours == seeded["hours"]
    assert doc["outbox"]["pending"] == 2
    # The oldest owed row (billing's) was 10 min old by the database's clock at t0, and
    # that clock ran on until the answer: no less than 10 min, no more than that since.
    assert 600 <= doc["outbox"]["lag_s"] <= 600 + (answered - clock.t0).total_seconds()
    assert doc["held_keys"] == {"count": 2, "oldest_hold_s": 1200.0}
    assert doc["settlement"]["pending"] is None
    providers = {p["provider"]: p for p in doc["providers"]}
    assert list(providers) == ["adyen", "github", "stripe", "service:billing"]
    assert [p["silent"] for p in providers.values()] == [True, True, False, False]
    assert providers["stripe"]["last_id"] == seeded["stripe_newest"]
    assert providers["stripe"]["age_s"] == 60
    assert providers["adyen"]["age_s"] == 3 * 86_400
    assert providers["github"]["last_id"] is None
    jobs = {j["id"]: j for j in doc["replay_jobs"]}
    assert list(jobs) == [seeded["running"], seeded["planned"]]
    assert jobs[seeded["running"]] | {} == jobs[seeded["running"]]
    assert (
        jobs[seeded["running"]]["replayed"],
        jobs[seeded["running"]]["failed"],
        jobs[seeded["running"]]["pending"],
    ) == (2, 1, 1)
    assert jobs[seeded["planned"]]["pending"] == 2


async def test_an_empty_database_shows_zeros_and_no_chart_bars_over_the_line(
    console: ConsoleHarness,
) -> None:
    await configure(console)
    r = await console.client(Role.VIEWER).get("/console/")
    assert r.status_code == 200
    assert figure(r.text, "open-total") == "0"
    assert "No open dead letters." in r.text
    assert "No replay job is running." in r.text
    assert "over-threshold" not in r.text
    assert figure(r.text, "outbox-lag") == "none owed"
    assert "confirm-pending" not in r.text and "Awaiting confirmation" not in r.text
    api = await console.client(Role.VIEWER).get("/console/api/v1/stats/overview")
    assert api.json()["confirm_pending"] == []


async def test_a_burst_is_flagged_against_the_alert_threshold(console: ConsoleHarness) -> None:
    """Eleven rows in 5 minutes: more than `[alerts] dlq_rows_max` (10)."""
    clock = await configure(console)
    for _ in range(11):
        await dead_letter(console, "settlement", clock.ago(minutes=1))
    r = await console.client(Role.VIEWER).get("/console/")
    assert 'id="burst" class="highlighted"' in r.text
    assert "the burst alert fires" in r.text
    assert (await console.client(Role.VIEWER).get("/console/api/v1/stats/overview")).json()[
        "dead_letters"
    ]["added_in_alert_window"] == 11


async def test_htmx_polls_a_partial_and_the_page_works_without_it(console: ConsoleHarness) -> None:
    await configure(console)
    viewer = console.client(Role.VIEWER)
    page = (await viewer.get("/console/")).text
    assert 'hx-get="/console/overview/partial"' in page
    # No trigger filter: htmx evaluates one with eval, which the CSP refuses; console.js
    # pauses the polling while the tab is hidden.
    assert 'hx-trigger="every 10s"' in page
    assert '<a href="/console/" class="refresh">' in page  # with JavaScript off
    assert " style=" not in page and "<script>" not in page
    for headers in ({"HX-Request": "true"}, {}):
        partial = await viewer.get("/console/overview/partial", headers=headers)
        assert partial.status_code == 200
        assert "<html" not in partial.text and 'id="open-total"' in partial.text
    swapped = await viewer.get("/console/", headers={"HX-Request": "true"})
    assert "<html" not in swapped.text and 'id="open-total"' in swapped.text


async def test_a_cookie_session_sees_the_page(console: ConsoleHarness) -> None:
    await configure(console)
    browser = await console.session_client(Role.VIEWER)
    r = await browser.get("/console/")
    assert r.status_code == 200 and "<h1>Overview</h1>" in r.text


@pytest.fixture
async def jetstream(nats_server: NatsServer) -> Any:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name="WEBHOOKS", subjects=["webhooks.>", "events.>"]))
    for i in range(5):
        await js.publish(f"webhooks.stripe.t{i}", b"{}")
    await js.add_consumer(
        "WEBHOOKS", ConsumerConfig(durable_name="settlement", ack_policy=AckPolicy.EXPLICIT)
    )
    yield nc
    with contextlib.suppress(Exception):  # the test may have stopped the server
        await nc.close()


async def test_the_settlement_backlog_comes_from_jetstream_and_nats_down_is_unavailable(
    console: ConsoleHarness, nats_server: NatsServer, jetstream: Any
) -> None:
    await configure(console)
    console.deps.nats = jetstream
    viewer = console.client(Role.VIEWER)
    r = await viewer.get("/console/")
    assert figure(r.text, "settlement-pending") == "5"
    api = (await viewer.get("/console/api/v1/stats/overview")).json()
    assert api["settlement"] == {"pending": 5, "note": None}

    nats_server.stop()
    async with asyncio.timeout(HANG_GUARD_S):
        r = await viewer.get("/console/")
        api = (await viewer.get("/console/api/v1/stats/overview")).json()
    assert r.status_code == 200
    assert "unavailable" in figure(r.text, "settlement")
    assert "NATS did not answer (" in settlement(r.text)
    assert figure(r.text, "open-total") == "0"  # the database's figures are all there
    assert api["settlement"]["pending"] is None
    assert api["settlement"]["note"].startswith("NATS did not answer (")


async def test_a_nats_never_reachable_leaves_the_page_answering(
    console: ConsoleHarness,
) -> None:
    """The console's own lazy connection to a NATS that is not there."""
    await configure(console)
    console.deps.nats = LazyNats(NatsSettings(url=f"nats://127.0.0.1:{free_port()}"))
    viewer = console.client(Role.VIEWER)
    try:
        async with asyncio.timeout(HANG_GUARD_S):
            r = await viewer.get("/console/")
            api = (await viewer.get("/console/api/v1/stats/overview")).json()
    finally:
        await console.deps.nats.close()
    assert r.status_code == 200
    assert "unavailable" in figure(r.text, "settlement")
    assert "NATS did not answer (" in settlement(r.text)
    assert figure(r.text, "open-total") == "0"
    assert api["settlement"]["pending"] is None
    assert api["settlement"]["note"].startswith("NATS did not answer (")


async def test_the_answers_are_the_documented_ones(console: ConsoleHarness) -> None:
    """The API's answer (seeded, and refused) matches its OpenAPI fragment."""
    await seed(console, await configure(console))
    viewer = console.client(Role.VIEWER)
    doc = (await viewer.get("/console/api/v1/openapi.json")).json()
    path = "/console/api/v1/stats/overview"
    r = await viewer.get(path)
    check_answer(doc, path, "get", r.status_code, r.headers, r.content)
    refused = await console.anonymous().get(path)
    assert str(refused.status_code) in doc["paths"][path]["get"]["responses"]


async def test_a_missing_consumer_is_named_as_the_reason(
    console: ConsoleHarness, jetstream: Any
) -> None:
    """The stream is there but `gateway settle` never made its consumer."""
    await configure(console)
    await jetstream.jetstream().delete_consumer("WEBHOOKS", "settlement")
    console.deps.nats = jetstream
    api = (await console.client(Role.VIEWER).get("/console/api/v1/stats/overview")).json()
    assert api["settlement"] == {"pending": None, "note": "no consumer 'settlement' on WEBHOOKS"}


async def test_the_event_types_that_moved_no_money_are_named(console: ConsoleHarness) -> None:
    """What the settle processes recorded in `settlement_unmapped`: the types seen in the
    last 7 days, the most recent first, on the page (escaped) and in the API; an older
    one is not shown."""
    clock = await configure(console)
    for provider, event_type, events, seen in (
        ("stripe", "customer.created", 12, clock.ago(minutes=2)),
        ("paddle", "<b>subscription</b>.created", 1, clock.ago(hours=5)),
        ("stripe", "invoice.paid", 3, clock.ago(days=8)),
    ):
        await console.fetchval(
            "INSERT INTO settlement_unmapped (provider, event_type, events, first_seen,"
            " last_seen) VALUES ($1, $2, $3, $4, $4)",
            provider, event_type, events, seen,
        )  # fmt: skip
    viewer = console.client(Role.VIEWER)
    html = (await viewer.get("/console/")).text
    found = re.search(r'<dd id="unmapped">(.*?)</dd>', html, re.S)
    assert found, "no unmapped figure on the page"
    shown = found.group(1)
    assert "<code>stripe</code> <code>customer.created</code>: 12 events" in shown
    assert "<code>&lt;b&gt;subscription&lt;/b&gt;.created</code>: 1 event," in shown
    assert "invoice.paid" not in shown
    api = await viewer.get("/console/api/v1/stats/overview")
    assert [(u["provider"], u["type"], u["events"]) for u in api.json()["unmapped_types"]] == [
        ("stripe", "customer.created", 12),
        ("paddle", "<b>subscription</b>.created", 1),
    ]
    doc = (await viewer.get("/console/api/v1/openapi.json")).json()
    path = "/console/api/v1/stats/overview"
    check_answer(doc, path, "get", api.status_code, api.headers, api.content)


async def owed_fetches(
    console: ConsoleHarness, provider: str, state: str, created: list[datetime]
) -> None:
    """Webhooks recorded unpublished, as the confirm stage records them, each with its
    fetch in `state` since the given time."""
    ids = await console.fetch(
        "INSERT INTO processed_webhooks (provider, event_id, body, received_at)"
        " SELECT $1, gen_random_uuid()::text, '{}', t FROM unnest($2::timestamptz[]) AS t"
        " RETURNING id, received_at",
        provider,
        created,
    )
    await console.fetchval(
        "INSERT INTO confirmations (webhook_id, provider, state, created_at, pending_since)"
        " SELECT w, $2, $3, t, t FROM unnest($1::bigint[], $4::timestamptz[]) AS r(w, t)",
        [r["id"] for r in ids],
        provider,
        state,
        [r["received_at"] for r in ids],
    )


def text_of(html: str, ident: str) -> str:
    """An element's text as read: tags left out, spaces collapsed."""
    found = re.search(rf'<(\w+) id="{ident}"[^>]*>(.*?)</\1>', html, re.S)
    assert found, f"no element #{ident} on the page"
    return " ".join(re.sub(r"<[^>]+>", " ", found.group(2)).split())


async def test_the_webhooks_awaiting_their_confirm_fetch_are_counted_by_provider(
    console: ConsoleHarness,
) -> None:
    """A provider's API down for a while: its pending fetches are counted with the oldest
    one's age, flagged past the backlog alert's 10 min; confirmed and parked
    fetches are not counted (nor do their older rows make the oldest older)."""
    clock = await configure(console)
    ago = clock.ago
    await owed_fetches(console, "mollie", "pending", [ago(minutes=12)] + [ago(minutes=1)] * 999)
    await owed_fetches(console, "mollie", "confirmed", [ago(hours=2)] * 5)
    await owed_fetches(console, "mollie", "parked", [ago(hours=2, minutes=30)])
    await owed_fetches(console, "mollie", "parked", [ago(hours=4)])
    await owed_fetches(console, "paypal", "pending", [ago(minutes=3)])
    await owed_fetches(console, "adyen", "confirmed", [ago(minutes=30)])
    viewer = console.client(Role.VIEWER)

    html = (await viewer.get("/console/")).text
    assert 'id="confirm-pending" class="highlighted"' in html  # mollie's is past 10 min
    shown = text_of(html, "confirm-pending")
    assert shown.startswith(
        "mollie — 1,000 webhooks, oldest 12 min over 10 min: the confirm backlog alert fires"
        " paypal — 1 webhook, oldest 3 min recorded,"
    ), shown
    assert "adyen" not in shown
    # The partial htmx swaps in says the same.
    partial = (await viewer.get("/console/overview/partial")).text
    assert text_of(partial, "confirm-pending") == shown

    api = await viewer.get("/console/api/v1/stats/overview")
    answered = await db_now(console)
    assert api.status_code == 200
    doc = api.json()
    pending = doc["confirm_pending"]
    assert [(c["provider"], c["pending"]) for c in pending] == [("mollie", 1000), ("paypal", 1)]
    # Ages by the database's clock, which ran on from t0 until the answer.
    ran_s = (answered - clock.t0).total_seconds()
    assert 720 <= pending[0]["oldest_s"] <= 720 + ran_s
    assert 180 <= pending[1]["oldest_s"] <= 180 + ran_s
    assert doc["thresholds"]["confirm_backlog_max_s"] == 600
    assert doc["outbox"]["pending"] == 0  # recorded without a subject: nothing to publish
    spec = (await viewer.get("/console/api/v1/openapi.json")).json()
    path = "/console/api/v1/stats/overview"
    check_answer(spec, path, "get", api.status_code, api.headers, api.content)

    # The API answers again: nothing owed is nothing shown.
    await console.fetchval("UPDATE confirmations SET state = 'confirmed'")
    assert (await viewer.get("/console/api/v1/stats/overview")).json()["confirm_pending"] == []
    assert "Awaiting confirmation" not in (await viewer.get("/console/")).text
