"""GoCardless's amounts by fetch, end to end: a signed batch of 50 events posted to a
real gateway, the events that move money confirmed by the confirm stage against a
local stand-in of GoCardless's API, settled by the real worker on PostgreSQL, NATS
JetStream, Redis and the currency stub.

The batch: one changed byte refuses it whole (498), nothing stored, nothing fetched.
The genuine batch, answered while no confirm stage runs (a restart between the answer
and the fetches): 50 rows, the 20 that move money waiting unpublished, the 30 others
published as they came. Then the stage fetches each object once and every movement
settles once; the same batch again is 50 duplicates and moves nothing more. A payout
later takes the merchant's money out. An object the API does not know, an answer
about another object, and an amount that is not an integer are parked at `confirm`.
"""

from __future__ import annotations

import hashlib
import hmac
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.responses import Response

from tests.integration.providers.test_hmac_providers_end_to_end import ended, settled
from tests.support.confirming import QUICK, confirming, run_gateway, serving
from tests.support.gateway import RunningServer, config
from tests.support.gocardless_api import (
    API_KEY,
    GoCardlessApi,
    running_gocardless_api,
    stand_in_keys,
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

SECRET = "gc_confirm_Jk8sPq2vXw5yZb7n"
MERCHANT = "m_gocardless"
KEY_ENV = "GOCARDLESS_TEST_TOKEN"
ENV = {KEY_ENV: API_KEY}


@pytest.fixture
async def api() -> Any:
    async with running_gocardless_api() as running:
        yield running


@pytest.fixture
def doc(database_url: str, nats_url: str, stub: Stub, redis_url: str, api: GoCardlessApi) -> Any:
    found = config(database_url, nats_url, **settlement_sections(stub.url, redis_url))
    found["providers"]["gocardless"] = {
        "scheme": "gocardless", "secrets": [SECRET], **stand_in_keys(api.url, KEY_ENV),
    }  # fmt: skip
    found["confirm"] = dict(QUICK, max_attempts=3)
    return found


def event(n: int, resource: str, action: str, **links: str) -> dict[str, Any]:
    return {"id": f"EV{n:012d}", "created_at": "2026-12-06T10:00:00.000Z",
            "resource_type": resource, "action": action, "links": links,
            "details": {"origin": "gocardless", "cause": f"{resource}_{action}"},
            "metadata": {}}  # fmt: skip


def signed_batch(events: list[dict[str, Any]]) -> tuple[bytes, dict[str, str]]:
    body = orjson.dumps({"events": events, "meta": {"webhook_id": "WB000CONFIRM"}},
                        option=orjson.OPT_INDENT_2)  # fmt: skip
    mac = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return body, {"Webhook-Signature": mac, "Content-Type": "application/json"}


def fifty(api: GoCardlessApi) -> list[dict[str, Any]]:
    """The batch, and the objects it names: ten payments confirmed (10.00 to 100.00),
    five refunded (1.00 each), the first refund failed and its funds returned, two
    payments charged back and one of those cancelled; 30 events that move nothing."""
    events: list[dict[str, Any]] = []
    for i in range(10):
        api.payment(f"PM{i:04d}", 1_000 * (i + 1), "USD", MERCHANT)
        events.append(event(len(events), "payments", "confirmed", payment=f"PM{i:04d}"))
    for i in range(5):
        api.refund(f"RF{i:04d}", f"PM{i:04d}", 100, "USD")
        events.append(event(len(events), "refunds", "created", refund=f"RF{i:04d}",
                            payment=f"PM{i:04d}"))  # fmt: skip
    events.append(event(len(events), "refunds", "failed", refund="RF0000", payment="PM0000"))
    events.append(event(len(events), "refunds", "funds_returned", refund="RF0000"))
    for i in (5, 6):
        events.append(event(len(events), "payments", "charged_back", payment=f"PM{i:04d}"))
    events.append(event(len(events), "payments", "chargeback_cancelled", payment="PM0005"))
    while len(events) < 50:
        events.append(event(len(events), "mandates", "created", mandate="MD000STANDIN"))
    return events


async def rows(dsn: str) -> list[Any]:
    return await fetch(
        dsn,
        "SELECT event_id, event_type, subject, source FROM processed_webhooks"
        " WHERE provider = 'gocardless' ORDER BY id",
    )


async def states(dsn: str) -> list[str]:
    found = await fetch(dsn, "SELECT state FROM confirmations ORDER BY webhook_id")
    return [r["state"] for r in found]


async def _all_confirmed(dsn: str, n: int) -> bool:
    return await states(dsn) == ["confirmed"] * n


async def post(server: RunningServer, body: bytes, headers: dict[str, str]) -> Any:
    return await server.client.post("/webhooks/gocardless", content=body, headers=headers)


async def test_fifty_events_settle_once_each_after_their_fetches_even_across_a_restart(
    doc: dict[str, Any], database_url: str, nats_url: str, api: GoCardlessApi
) -> None:
    body, headers = signed_batch(fifty(api))
    tampered = body.replace(b"EV000000000031", b"EV000000000032", 1)
    assert tampered != body
    async with serving(doc, ENV) as server:
        refused = await post(server, tampered, headers)
        assert refused.status_code == 498
        assert await rows(database_url) == []
        answer = await post(server, body, headers)
        assert answer.status_code == 200, answer.text
    # Answered; nothing fetched yet: the 20 movements wait in PostgreSQL, unpublished.
    assert api.requests == []
    recorded = await rows(database_url)
    assert len(recorded) == 50 and {r["source"] for r in recorded} == {"live"}
    waiting = [r["event_id"] for r in recorded if r["subject"] is None]
    assert waiting == [f"EV{n:012d}" for n in range(20)]
    assert await states(database_url) == ["pending"] * 20

    async with (
        serving(doc, ENV) as server,
        running_worker(doc, ENV) as parts,
        confirming(doc, ENV),
    ):
        await open_merchant(parts, MERCHANT)
        await wait_until(partial(_all_confirmed, database_url, 20))
        await wait_until(partial(ended, database_url, 19))
        # 550.00 captured, 5.00 refunded and 1.00 of it back, 130.00 charged back and
        # 60.00 of it back.
        assert await merchant_balance(parts, MERCHANT) == 55_000 - 500 + 100 - 13_000 + 6_000
        fetched = list(api.fetched())
        assert sorted(fetched) == sorted(
            [f"/payments/PM{i:04d}" for i in (*range(10), 5, 6, 5)]
            + [f"/refunds/RF{i:04d}" for i in (*range(5), 0, 0)]
        )
        assert {(h["authorization"], h["gocardless-version"]) for _, h in api.requests} == {
            (f"Bearer {API_KEY}", "2015-07-06")
        }

        # GoCardless retries the whole batch: 50 duplicates, nothing moves again.
        again = await post(server, body, headers)
        assert {e["status"] for e in again.json()["events"]} == {"duplicate"}
        await wait_until(lambda: _fetched_more(api, len(fetched)))
        await wait_until(partial(_all_confirmed, database_url, 20))

        # A payout later: the merchant's money leaves.
        api.payout("PO0001", 20_000, "USD", MERCHANT)
        payout_body, payout_headers = signed_batch([
            event(100, "payouts", "paid", payout="PO0001"),
            event(101, "creditors", "updated", creditor="CR000STANDIN"),
        ])  # fmt: skip
        assert (await post(server, payout_body, payout_headers)).status_code == 200
        await wait_until(partial(ended, database_url, 20))
        assert await merchant_balance(parts, MERCHANT) == 47_600 - 20_000

    assert sorted(await settled(database_url, "gocardless")) == sorted(
        [("capture", None, 1_000 * (i + 1), MERCHANT) for i in range(10)]
        + [("refund", f"RF{i:04d}", 100, MERCHANT) for i in range(5)]
        + [("refund_reversal", "RF0000", 100, MERCHANT)]
        + [("chargeback", f"PM{i:04d}:chargeback", 1_000 * (i + 1), MERCHANT) for i in (5, 6)]
        + [("chargeback_reversal", "PM0005:chargeback", 6_000, MERCHANT)]
        + [("payout", "PO0001", 20_000, MERCHANT)]
    )
    assert await fetch(database_url, "SELECT event_id FROM dlq_webhooks") == []
    messages = await stream_messages(nats_url)
    ids = sorted(m[1]["Nats-Msg-Id"] for m in messages if m[1]["Nats-Msg-Id"].startswith("gocard"))
    expected = [f"EV{n:012d}" for n in range(20, 50)] + [f"EV{n:012d}:confirmed" for n in range(20)]
    expected += ["EV000000000100:confirmed", "EV000000000101"]
    assert ids == sorted(f"gocardless:{e}" for e in expected)  # each once


async def _fetched_more(api: GoCardlessApi, than: int) -> bool:
    return len(api.requests) > than


async def test_an_unknown_object_another_object_and_a_bad_amount_are_parked(
    doc: dict[str, Any], database_url: str, api: GoCardlessApi
) -> None:
    api.payment("PM0OTHER", 500, "USD", MERCHANT)
    api.payment("PM0WRONGAMT", 500, "USD", MERCHANT)
    api.objects["/payments/PM0WRONGAMT"]["amount"] = "5.00"
    api.answer_with(
        "/payments/PM0ASKED",
        Response(orjson.dumps({"payments": api.objects["/payments/PM0OTHER"]}),
                 media_type="application/json"),
    )  # fmt: skip
    body, headers = signed_batch([
        event(1, "payments", "confirmed", payment="PM0FORGED"),
        event(2, "payments", "confirmed", payment="PM0ASKED"),
        event(3, "payments", "confirmed", payment="PM0WRONGAMT"),
    ])  # fmt: skip
    async with serving(doc, ENV) as server, confirming(doc, ENV):
        assert (await post(server, body, headers)).status_code == 200

        async def parked() -> bool:
            return await states(database_url) == ["parked"] * 3

        await wait_until(parked)
    found = await fetch(
        database_url,
        "SELECT event_id, stage, error_class FROM dlq_webhooks ORDER BY event_id",
    )
    assert [(r["event_id"], r["stage"], r["error_class"]) for r in found] == [
        ("EV000000000001", "confirm", "CONFIRMATION_NOT_FOUND"),
        ("EV000000000002", "confirm", "CONFIRMATION_MISMATCH"),
        ("EV000000000003", "confirm", "PAYLOAD_INVALID"),
    ]
    assert [r["subject"] for r in await rows(database_url)] == [None] * 3  # none published


async def test_events_parked_at_ingest_are_replayed_into_a_fetch_or_onto_the_stream(
    doc: dict[str, Any], database_url: str, api: GoCardlessApi, tmp_path: Path
) -> None:
    """Parked by an `event_types` list that left them out, then replayed with it gone: a
    payment's event owes its fetch again and is never queued itself; a mandate's, which
    needs no fetch, is queued as any webhook."""
    api.payment("PM0PARKED", 900, "USD", MERCHANT)
    doc["providers"]["gocardless"]["event_types"] = ["refunds.*"]
    body, headers = signed_batch([
        event(1, "payments", "confirmed", payment="PM0PARKED"),
        event(2, "mandates", "created", mandate="MD000STANDIN"),
    ])  # fmt: skip
    async with serving(doc, ENV) as server:
        assert (await post(server, body, headers)).status_code == 200
    parked = await fetch(database_url, "SELECT event_id, stage, error_class FROM dlq_webhooks"
                         " ORDER BY event_id")  # fmt: skip
    assert [(r["event_id"], r["stage"], r["error_class"]) for r in parked] == [
        ("EV000000000001", "ingest", "EVENT_TYPE_NOT_ALLOWED"),
        ("EV000000000002", "ingest", "EVENT_TYPE_NOT_ALLOWED"),
    ]
    assert await states(database_url) == [] and api.requests == []

    del doc["providers"]["gocardless"]["event_types"]
    replayed = await run_gateway(tmp_path, doc, ENV, "dlq", "replay", "--all", "--stage", "ingest")
    assert replayed.returncode == 0, replayed.stderr
    assert await states(database_url) == ["pending"]
    assert [(r["event_id"], r["subject"]) for r in await rows(database_url)] == [
        ("EV000000000001", None),
        ("EV000000000002", "webhooks.gocardless.mandates.created"),
    ]
    async with confirming(doc, ENV):
        await wait_until(partial(_all_confirmed, database_url, 1))
    assert [(r["event_id"], r["subject"]) for r in await rows(database_url)][2:] == [
        ("EV000000000001:confirmed", "webhooks.gocardless.payments.confirmed")
    ]
