"""Mollie's classic webhooks end to end: `id=tr_…` posted to a real gateway, the
payment fetched by the confirm stage from a local stand-in of Mollie's API, the changes
it holds recorded, published and settled by the real worker on PostgreSQL, NATS
JetStream, Redis and the currency stub.

A payment paid, refunded twice and charged back, each change announced by the same
id-only webhook: the ledger ends right and each change settles once. Webhooks recorded
while no confirm stage runs are fetched when one starts (a restart between the answer
and the fetch); an API that is down leaves them waiting in PostgreSQL and they are
confirmed once when it answers again; answers about another payment, redirects and
refusals are parked at stage `confirm`, and replayed; a forged id fetches nothing."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from starlette.responses import Response

from tests.integration.providers.test_hmac_providers_end_to_end import ended, settled
from tests.support.cli import GATEWAY
from tests.support.config_file import write_toml
from tests.support.confirming import QUICK, confirming, run_gateway, serving
from tests.support.dead_letters import park
from tests.support.gateway import RunningServer, config
from tests.support.mollie_api import (
    API_KEY,
    MollieApi,
    running_mollie_api,
    slow,
    stand_in_keys,
)
from tests.support.processes import clean_env
from tests.support.services import wait_until
from tests.support.settlement import (
    fetch,
    merchant_balance,
    open_merchant,
    running_worker,
    settlement_sections,
)
from tests.support.stub import Stub

MERCHANT = "m_mollie"
KEY_ENV = "MOLLIE_TEST_KEY"
ENV = {KEY_ENV: API_KEY}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture
async def api() -> Any:
    async with running_mollie_api() as running:
        yield running


@pytest.fixture
def doc(database_url: str, nats_url: str, stub: Stub, redis_url: str, api: MollieApi) -> Any:
    found = config(database_url, nats_url, **settlement_sections(stub.url, redis_url))
    found["providers"]["mollie"] = {"scheme": "mollie", **stand_in_keys(api.url, KEY_ENV)}
    found["confirm"] = dict(QUICK, max_attempts=4)
    return found


async def webhook(server: RunningServer, payment_id: str) -> tuple[int, str]:
    answer = await server.client.post("/webhooks/mollie", content=f"id={payment_id}", headers=FORM)
    return answer.status_code, answer.json()["status"]


async def states(dsn: str) -> dict[str, str]:
    rows = await fetch(
        dsn,
        "SELECT p.event_id, c.state FROM confirmations c"
        " JOIN processed_webhooks p ON p.id = c.webhook_id ORDER BY p.id",
    )
    return {r["event_id"]: r["state"] for r in rows}


async def recorded(dsn: str) -> list[tuple[str, str | None, str]]:
    """Every `mollie` row: (event id, subject, source), in the order recorded."""
    rows = await fetch(
        dsn,
        "SELECT event_id, subject, source FROM processed_webhooks"
        " WHERE provider = 'mollie' ORDER BY id",
    )
    return [(r["event_id"], r["subject"], r["source"]) for r in rows]


async def dead_letters(dsn: str) -> list[tuple[str, str, str]]:
    rows = await fetch(
        dsn,
        "SELECT event_id, stage, error_class FROM dlq_webhooks WHERE NOT is_resolved ORDER BY id",
    )
    return [(r["event_id"], r["stage"], r["error_class"]) for r in rows]


async def test_a_payment_paid_refunded_twice_and_charged_back_ends_right(
    doc: dict[str, Any], database_url: str, api: MollieApi
) -> None:
    api.pay("tr_life", "100.00", "USD", metadata={"merchant_id": MERCHANT})
    async with (
        serving(doc, ENV) as server,
        running_worker(doc, ENV) as parts,
        confirming(doc, ENV),
    ):
        await open_merchant(parts, MERCHANT)
        assert await webhook(server, "tr_life") == (200, "accepted")
        await wait_until(lambda: ended(database_url, 1))
        assert await merchant_balance(parts, MERCHANT) == 10_000

        steps: list[tuple[Callable[[], object], int, int]] = [
            (lambda: api.refund("tr_life", "re_one", "20.00"), 2, 8_000),
            (lambda: api.refund("tr_life", "re_two", "30.00"), 3, 5_000),
            (lambda: api.chargeback("tr_life", "chb_one", "50.00"), 4, 0),
        ]
        for change, n, balance in steps:
            change()
            # Mollie calls the same webhook, with the same id, on every change.
            assert await webhook(server, "tr_life") == (200, "duplicate")
            await wait_until(partial(ended, database_url, n))
            assert await merchant_balance(parts, MERCHANT) == balance

        # A webhook with nothing new: fetched again, nothing recorded again.
        fetched = len(api.requests)
        assert await webhook(server, "tr_life") == (200, "duplicate")
        await wait_until(lambda: _more(api, fetched))
        await wait_until(lambda: _states_are(database_url, {"tr_life": "confirmed"}))

    assert await settled(database_url, "mollie") == [
        ("capture", None, 10_000, MERCHANT),
        ("refund", "re_one", 2_000, MERCHANT),
        ("refund", "re_two", 3_000, MERCHANT),
        ("chargeback", "chb_one", 5_000, MERCHANT),
    ]
    assert await recorded(database_url) == [
        ("tr_life", None, "live"),  # the webhook itself is never published
        ("tr_life:paid", "webhooks.mollie.payment.paid", "confirmed"),
        ("tr_life:refund:re_one", "webhooks.mollie.refund.refunded", "confirmed"),
        ("tr_life:refund:re_two", "webhooks.mollie.refund.refunded", "confirmed"),
        ("tr_life:chargeback:chb_one", "webhooks.mollie.chargeback.received", "confirmed"),
    ]
    assert await dead_letters(database_url) == []
    assert set(api.requests) == {"/v2/payments/tr_life?embed=refunds%2Cchargebacks"}


async def _more(api: MollieApi, than: int) -> bool:
    return len(api.requests) > than


async def _states_are(dsn: str, expected: dict[str, str]) -> bool:
    return await states(dsn) == expected


async def test_webhooks_recorded_while_no_stage_runs_are_confirmed_when_one_starts(
    doc: dict[str, Any], database_url: str, api: MollieApi
) -> None:
    ids = [f"tr_restart{n}" for n in range(20)]
    for payment_id in ids:
        api.pay(payment_id, "10.00", "EUR", metadata={"merchant_id": MERCHANT})
    async with serving(doc, ENV) as server:
        for payment_id in ids:
            assert await webhook(server, payment_id) == (200, "accepted")
    # Answered, and nothing fetched or published yet: the fetches are owed in the table.
    assert api.requests == []
    assert set((await states(database_url)).values()) == {"pending"}
    assert [r for r in await recorded(database_url) if r[1] is not None] == []

    async with confirming(doc, ENV):
        await wait_until(lambda: _states_are(database_url, dict.fromkeys(ids, "confirmed")))
    published = [r[0] for r in await recorded(database_url) if r[1] is not None]
    assert sorted(published) == sorted(f"{p}:paid" for p in ids)
    assert sorted(api.requests) == sorted(
        f"/v2/payments/{p}?embed=refunds%2Cchargebacks" for p in ids
    )  # each fetched once


async def test_an_api_that_is_down_leaves_the_webhooks_waiting_and_loses_none(
    doc: dict[str, Any], database_url: str, api: MollieApi
) -> None:
    doc["confirm"]["max_attempts"] = 1000  # an outage is waited out, never parked
    ids = [f"tr_down{n}" for n in range(50)]
    for payment_id in ids:
        api.pay(payment_id, "10.00", "EUR", metadata={"merchant_id": MERCHANT})
    api.down = True
    async with serving(doc, ENV) as server, confirming(doc, ENV) as metrics:
        for payment_id in ids:
            assert await webhook(server, payment_id) == (200, "accepted")
        await wait_until(lambda: _tried_at_least(database_url, 3))
        assert set((await states(database_url)).values()) == {"pending"}
        assert metrics.confirm_fetches_total.get(outcome="retry", provider="mollie") >= 50
        api.down = False
        await wait_until(lambda: _states_are(database_url, dict.fromkeys(ids, "confirmed")))
    published = [r[0] for r in await recorded(database_url) if r[1] is not None]
    assert sorted(published) == sorted(f"{p}:paid" for p in ids)
    assert await dead_letters(database_url) == []


async def _tried_at_least(dsn: str, attempts: int) -> bool:
    rows = await fetch(dsn, "SELECT min(attempts) AS least FROM confirmations")
    return rows[0]["least"] is not None and rows[0]["least"] >= attempts


@pytest.mark.parametrize(
    ("case", "answer", "error_class"),
    [
        ("another payment", "other", "CONFIRMATION_MISMATCH"),
        ("a redirect", "redirect", "CONFIRMATION_REFUSED"),
        ("a refusal", "422", "CONFIRMATION_REFUSED"),
        ("not JSON", "html", "CONFIRMATION_REFUSED"),
    ],
)
async def test_a_wrong_answer_is_parked_and_a_replay_confirms_it_once_mended(
    doc: dict[str, Any], database_url: str, api: MollieApi, tmp_path: Path, case: str,
    answer: str, error_class: str,
) -> None:  # fmt: skip
    api.pay("tr_wrong", "10.00", "EUR", metadata={"merchant_id": MERCHANT})
    api.pay("tr_other", "99.00", "EUR", metadata={"merchant_id": MERCHANT})
    answers = {
        "other": api.payment_response("tr_other"),
        "redirect": Response(status_code=302, headers={"location": "https://evil.example/x"}),
        "422": Response(b'{"status":422,"title":"Unprocessable Entity"}', status_code=422),
        "html": Response(b"<html>maintenance</html>", status_code=200),
    }
    api.answer_with("tr_wrong", answers[answer])
    async with serving(doc, ENV) as server, confirming(doc, ENV):
        assert await webhook(server, "tr_wrong") == (200, "accepted")
        await wait_until(lambda: _states_are(database_url, {"tr_wrong": "parked"}))
        assert await dead_letters(database_url) == [("tr_wrong", "confirm", error_class)]
        assert [r for r in await recorded(database_url) if r[1] is not None] == []

        api.answer_with("tr_wrong", None)  # mended
        replayed = await gateway_cli(tmp_path, doc, "dlq", "replay", "--all", "--stage", "confirm")
        assert replayed.returncode == 0, replayed.stderr
        await wait_until(lambda: _states_are(database_url, {"tr_wrong": "confirmed"}))
    assert await dead_letters(database_url) == []
    published = [r[0] for r in await recorded(database_url) if r[1] is not None]
    assert published == ["tr_wrong:paid"]


async def test_an_unknown_id_is_parked_where_a_person_sees_it_and_replayed_once_found(
    doc: dict[str, Any], database_url: str, api: MollieApi, tmp_path: Path
) -> None:
    """A 404: a forged id, or the key of another account or mode, which would drop every
    genuine payment's events unseen; parked, and replayed once the payment is found."""
    async with serving(doc, ENV) as server, confirming(doc, ENV):
        assert await webhook(server, "tr_unknown") == (200, "accepted")
        await wait_until(lambda: _states_are(database_url, {"tr_unknown": "parked"}))
        assert await dead_letters(database_url) == [
            ("tr_unknown", "confirm", "CONFIRMATION_NOT_FOUND")
        ]
        assert [r for r in await recorded(database_url) if r[1] is not None] == []

        api.pay("tr_unknown", "10.00", "EUR", metadata={"merchant_id": MERCHANT})  # found now
        replayed = await gateway_cli(tmp_path, doc, "dlq", "replay", "--all", "--stage", "confirm")
        assert replayed.returncode == 0, replayed.stderr
        await wait_until(lambda: _states_are(database_url, {"tr_unknown": "confirmed"}))
    assert await dead_letters(database_url) == []
    published = [r[0] for r in await recorded(database_url) if r[1] is not None]
    assert published == ["tr_unknown:paid"]


async def test_a_body_that_names_no_payment_is_refused_as_a_webhook_and_parked(
    doc: dict[str, Any], database_url: str
) -> None:
    async with serving(doc, ENV) as server:
        answer = await server.client.post(
            "/webhooks/mollie", content=b"id=tr_x&amount=100", headers=FORM
        )
        assert answer.status_code == 200  # recorded and parked: the provider's data is kept
    assert [r[1:] for r in await dead_letters(database_url)] == [("ingest", "PAYLOAD_INVALID")]
    assert await states(database_url) == {}


async def gateway_cli(tmp_path: Path, doc: dict[str, Any], *args: str) -> Any:
    """`gateway ARGS --config FILE` (in this process), with the API key's variable set."""
    return await run_gateway(tmp_path, doc, ENV, *args)


async def test_the_gateway_confirm_process_confirms_and_stops_on_sigterm(
    doc: dict[str, Any], database_url: str, api: MollieApi, tmp_path: Path
) -> None:
    api.pay("tr_process", "10.00", "EUR", metadata={"merchant_id": MERCHANT})
    async with serving(doc, ENV) as server:
        assert await webhook(server, "tr_process") == (200, "accepted")
    path = write_toml(tmp_path / "gateway.toml", doc)
    env = clean_env() | ENV
    process = subprocess.Popen(
        [GATEWAY, "confirm", "--config", str(path), "--metrics-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    try:
        await wait_until(lambda: _states_are(database_url, {"tr_process": "confirmed"}), 20)
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = await asyncio.to_thread(process.communicate, timeout=30)
    assert process.returncode == 0, err.decode()[-2000:]
    published = [r[0] for r in await recorded(database_url) if r[1] is not None]
    assert published == ["tr_process:paid"]


async def test_a_webhook_parked_at_ingest_is_replayed_into_a_fetch_never_published_itself(
    doc: dict[str, Any], database_url: str, api: MollieApi, tmp_path: Path
) -> None:
    """A Mollie webhook parked at `ingest` (here written as a dead letter would be) and
    valid now: its replay owes the fetch; it is never queued for the stream itself."""
    api.pay("tr_parked", "10.00", "EUR", metadata={"merchant_id": MERCHANT})
    conn = await asyncpg.connect(database_url)
    try:
        await park(conn, "tr_parked", stage="ingest", provider="mollie",
                   event_type="payment.webhook", error_class="HEADERS_INVALID",
                   payload=b"id=tr_parked", headers={})  # fmt: skip
        # As the ingest path records a parked event: without a subject.
        await conn.execute("UPDATE processed_webhooks SET subject = NULL")
    finally:
        await conn.close()

    replayed = await gateway_cli(tmp_path, doc, "dlq", "replay", "--all", "--stage", "ingest")
    assert replayed.returncode == 0, replayed.stderr
    assert await states(database_url) == {"tr_parked": "pending"}
    assert await recorded(database_url) == [("tr_parked", None, "live")]  # not published
    async with confirming(doc, ENV):
        await wait_until(lambda: _states_are(database_url, {"tr_parked": "confirmed"}))
    assert await dead_letters(database_url) == []
    published = [r[0] for r in await recorded(database_url) if r[1] is not None]
    assert published == ["tr_parked:paid"]


async def test_event_types_narrow_the_confirmed_events_not_the_webhook(
    doc: dict[str, Any], database_url: str, api: MollieApi, tmp_path: Path
) -> None:
    """`event_types` keeps only the confirmed events it names: the others are recorded
    and parked as any event off the list is; the webhook itself is never refused."""
    api.pay("tr_narrow", "10.00", "EUR", metadata={"merchant_id": MERCHANT})
    api.refund("tr_narrow", "re_narrow", "4.00")
    doc["providers"]["mollie"]["event_types"] = ["payment.*"]
    async with serving(doc, ENV) as server, confirming(doc, ENV):
        assert await webhook(server, "tr_narrow") == (200, "accepted")
        await wait_until(lambda: _states_are(database_url, {"tr_narrow": "confirmed"}))
    assert await recorded(database_url) == [
        ("tr_narrow", None, "live"),
        ("tr_narrow:paid", "webhooks.mollie.payment.paid", "confirmed"),
        ("tr_narrow:refund:re_narrow", None, "confirmed"),
    ]
    assert await dead_letters(database_url) == [
        ("tr_narrow:refund:re_narrow", "ingest", "EVENT_TYPE_NOT_ALLOWED")
    ]

    # Widened, the parked event is replayed as the event its fetch found: published.
    del doc["providers"]["mollie"]["event_types"]
    replayed = await gateway_cli(tmp_path, doc, "dlq", "replay", "--all", "--stage", "ingest")
    assert replayed.returncode == 0, replayed.stderr
    assert await dead_letters(database_url) == []
    assert (await recorded(database_url))[2] == (
        "tr_narrow:refund:re_narrow",
        "webhooks.mollie.refund.refunded",
        "confirmed",
    )


async def test_a_slow_answer_holds_its_own_slot_not_the_stage(
    doc: dict[str, Any], database_url: str, api: MollieApi
) -> None:
    """One payment's answer trickles for 6 s: the 30 others are confirmed meanwhile."""
    doc["confirm"]["concurrency"] = 2
    ids = [f"tr_quick{n}" for n in range(30)]
    for payment_id in [*ids, "tr_slow"]:
        api.pay(payment_id, "10.00", "EUR", metadata={"merchant_id": MERCHANT})
    api.answer_with("tr_slow", slow(bytes(api.payment_response("tr_slow").body), 0.6))
    async with serving(doc, ENV) as server, confirming(doc, ENV):
        assert await webhook(server, "tr_slow") == (200, "accepted")
        for payment_id in ids:
            assert await webhook(server, payment_id) == (200, "accepted")
        every = dict.fromkeys([*ids, "tr_slow"], "confirmed")
        await wait_until(lambda: _states_are(database_url, every), 30.0)
    rows = await fetch(
        database_url,
        "SELECT p.event_id, c.fetched_at FROM confirmations c"
        " JOIN processed_webhooks p ON p.id = c.webhook_id",
    )
    fetched = {r["event_id"]: r["fetched_at"] for r in rows}
    # Every quick one ended before the slow one: none waited behind it.
    assert max(fetched[p] for p in ids) < fetched["tr_slow"]


async def test_a_retry_after_is_waited_out(
    doc: dict[str, Any], database_url: str, api: MollieApi
) -> None:
    """A 429 asking for 2 s: the next try waits 2 s, not the schedule's 0.1 s."""
    doc["confirm"]["max_delay_s"] = 5.0
    api.pay("tr_busy", "10.00", "EUR", metadata={"merchant_id": MERCHANT})
    api.fail_next(1, status=429, retry_after=2)
    async with serving(doc, ENV) as server, confirming(doc, ENV):
        assert await webhook(server, "tr_busy") == (200, "accepted")
        await wait_until(lambda: _more(api, 0))
        first = time.monotonic()
        await wait_until(lambda: _states_are(database_url, {"tr_busy": "confirmed"}))
        waited_s = time.monotonic() - first
    assert waited_s >= 1.5, waited_s  # the asked-for wait, less the claim's own delay
    assert len(api.requests) == 2
