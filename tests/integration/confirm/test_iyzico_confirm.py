"""iyzico end to end: a signed payment webhook posted to a real gateway, the payment
fetched by the confirm stage from a local stand-in of iyzico's `POST /payment/detail`
(which checks each request's `IYZWSv2` signature as iyzico does, and signs its answers),
and settled in lira by the real worker on PostgreSQL, NATS JetStream and Redis
(balances per currency: TRY stays TRY).

A direct payment's webhook and a checkout form's are each answered at once, recorded
unpublished, fetched once with a correctly signed request, and settled once as the
capture of `paidPrice`; iyzico's retry of the same webhook is a duplicate that moves
nothing. A webhook with one signed field changed is refused before anything is stored
or fetched. An answer signed with another key, or about another payment, and a fetch
iyzico refuses, are parked at `confirm` and settle once replayed after the mend. A
refund told by an internal service nets against the payment. An API down for a while
leaves the webhook waiting in PostgreSQL; it is confirmed once when the API is back.
A pre-authorisation is reserved, and its post-auth captures it.

Whose money: `merchant_id` names the merchant of a webhook naming no `merchantId`, and
`iyzico_merchant_id` refuses a webhook naming another account; one test, expected to
fail, shows the unsigned `merchantId` choosing the ledger account over `merchant_id`.

The stand-in itself is held to iyzico's own library: iyzipay 1.0.46's request is taken,
one signed with another secretKey refused, and its answer verifies as iyzipay's sample
verifies one.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import http.client
import json
import types
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.integration.providers.test_hmac_providers_end_to_end import ended, settled
from tests.support.confirming import QUICK, confirming, run_gateway, serving
from tests.support.gateway import BILLING_TOKEN, RunningServer, config
from tests.support.iyzico_api import (
    API_KEY,
    DETAIL_PATH,
    SECRET_KEY,
    IyzicoApi,
    authorization_problem,
    running_iyzico_api,
)
from tests.support.services import wait_until
from tests.support.settlement import (
    fetch,
    merchant_balance,
    open_merchant,
    running_worker,
    settlement_sections,
)
from tests.support.stub import Stub

#: iyzico's id of the account (its merchantId, as its webhooks carry it).
IYZICO_MID = "3382172"
#: The ledger's merchant of this iyzico account (`[providers.iyzico] merchant_id`).
MERCHANT = "m_ist"
#: Whose account a payment settles to: `merchant_id`'s, whatever `merchantId` the
#: webhook names (`test_merchant_id_names_every_payment_of_the_account`).
LEDGER_MERCHANT = MERCHANT
KEY_ENV = "IYZICO_API_KEY"
ENV = {KEY_ENV: API_KEY}
#: Each webhook's time (iyzico's `iyziEventTime`, epoch milliseconds).
EVENT_TIME_MS = 1_796_000_000_000


@pytest.fixture
async def api() -> Any:
    async with running_iyzico_api() as running:
        yield running


@pytest.fixture
def doc(database_url: str, nats_url: str, stub: Stub, redis_url: str, api: IyzicoApi) -> Any:
    sections = settlement_sections(stub.url, redis_url, settlement={"balances": "per_currency"})
    found = config(database_url, nats_url, **sections)
    found["providers"]["iyzico"] = {
        "scheme": "iyzico", "secrets": [SECRET_KEY], "api_key_env": KEY_ENV,
        "api_url": api.url, "insecure_api_url": True, "api_hosts": ["127.0.0.1"],
        "merchant_id": MERCHANT,
    }  # fmt: skip
    found["confirm"] = dict(QUICK, max_attempts=4)
    return found


# --- webhooks, as iyzico sends and signs them ------------------------------------------------


def direct(payment_id: str, conversation: str = "conv-1", **changes: Any) -> dict[str, Any]:
    """A direct API payment's webhook, as iyzipay-php's sample shows one (numbers as
    numbers); `changes` set (or, None, drop) fields."""
    found = {"paymentConversationId": conversation, "merchantId": int(IYZICO_MID),
             "paymentId": int(payment_id), "status": "SUCCESS",
             "iyziReferenceCode": str(uuid.uuid4()), "iyziEventType": "API_AUTH",
             "iyziEventTime": EVENT_TIME_MS, "iyziPaymentId": int(payment_id)}  # fmt: skip
    found.update(changes)
    return {k: v for k, v in found.items() if v is not None}


def checkout_form(payment_id: str, conversation: str = "conv-1", **changes: Any) -> dict[str, Any]:
    """A checkout form's (HPP) webhook: its token, and the payment as `iyziPaymentId`."""
    found = {"paymentConversationId": conversation, "merchantId": int(IYZICO_MID),
             "token": str(uuid.uuid4()), "status": "SUCCESS",
             "iyziReferenceCode": str(uuid.uuid4()), "iyziEventType": "CHECKOUT_FORM_AUTH",
             "iyziEventTime": EVENT_TIME_MS, "iyziPaymentId": int(payment_id)}  # fmt: skip
    found.update(changes)
    return {k: v for k, v in found.items() if v is not None}


def v3_signature(webhook: dict[str, Any], secret: str = SECRET_KEY) -> str:
    """`X-IYZ-SIGNATURE-V3`, written here from iyzipay-php's `samples/
    webhook_Signature_Validation.php`: the hex HMAC-SHA256, keyed with the secretKey,
    of the secretKey and the format's fields, concatenated."""
    names: tuple[str, ...]
    if "token" in webhook:
        names = ("iyziEventType", "iyziPaymentId", "token", "paymentConversationId", "status")
    else:
        names = ("iyziEventType", "paymentId", "paymentConversationId", "status")
    text = secret + "".join(str(webhook.get(name, "")) for name in names)
    return hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()


async def post(
    server: RunningServer, webhook: dict[str, Any], signature: str | None = None
) -> httpx.Response:
    """The webhook as iyzico posts it: JSON, with its V3 signature."""
    headers = {"Content-Type": "application/json",
               "X-IYZ-SIGNATURE-V3": signature or v3_signature(webhook)}  # fmt: skip
    return await server.client.post("/webhooks/iyzico", content=orjson.dumps(webhook),
                                    headers=headers)  # fmt: skip


async def accepted(server: RunningServer, webhook: dict[str, Any]) -> str:
    """Post the webhook; its answer's status (`accepted`, `duplicate`)."""
    answer = await post(server, webhook)
    assert answer.status_code == 200, answer.text
    status: str = answer.json()["status"]
    return status


# --- what the database holds -----------------------------------------------------------------


async def recorded(dsn: str) -> list[tuple[str, str | None, str]]:
    """Every `iyzico` row: (event id, subject, source), in the order recorded."""
    rows = await fetch(dsn, "SELECT event_id, subject, source FROM processed_webhooks"
                            " WHERE provider = 'iyzico' ORDER BY id")  # fmt: skip
    return [(r["event_id"], r["subject"], r["source"]) for r in rows]


async def published(dsn: str) -> list[str]:
    return [event_id for event_id, subject, _ in await recorded(dsn) if subject is not None]


async def states(dsn: str) -> list[str]:
    rows = await fetch(dsn, "SELECT state FROM confirmations ORDER BY webhook_id")
    return [r["state"] for r in rows]


async def _states_are(dsn: str, expected: list[str]) -> bool:
    return await states(dsn) == expected


async def dead_letters(dsn: str) -> list[tuple[str, str, str]]:
    rows = await fetch(dsn, "SELECT event_id, stage, error_class FROM dlq_webhooks"
                            " WHERE NOT is_resolved ORDER BY id")  # fmt: skip
    return [(r["event_id"], r["stage"], r["error_class"]) for r in rows]


async def _fetched(api: IyzicoApi, n: int) -> bool:
    return len(api.requests) >= n


def detail_body(payment_id: str, conversation: str = "conv-1") -> bytes:
    """The fetch's body as the gateway must send it, byte for byte (it is what is signed)."""
    return b'{"locale":"en","conversationId":"%s","paymentId":"%s"}' % (
        conversation.encode(), payment_id.encode())  # fmt: skip


# --- (a), (b): a payment confirmed once and settled once --------------------------------------


@pytest.mark.parametrize(
    ("shape", "event_type"),
    [(direct, "API_AUTH"), (checkout_form, "CHECKOUT_FORM_AUTH")],
    ids=["direct", "checkout-form"],
)
async def test_a_paid_webhook_is_fetched_once_and_settles_once_in_lira(
    doc: dict[str, Any], database_url: str, api: IyzicoApi, shape: Any, event_type: str
) -> None:
    """Paid 150.50 TRY on a basket of 140.00 (the rest an instalment surcharge): the
    capture is the 150.50 charged, 15,050 kuruş, and iyzico's retries move nothing."""
    api.pay("31000001", "150.50", "140.00", conversation_id="conv-1")
    webhook = shape("31000001")
    assert webhook["iyziEventType"] == event_type
    async with serving(doc, ENV) as server:
        assert await accepted(server, webhook) == "accepted"
    # Answered, nothing fetched yet: the webhook waits in PostgreSQL, unpublished.
    assert api.requests == []
    assert await recorded(database_url) == [(webhook["iyziReferenceCode"], None, "live")]
    assert await states(database_url) == ["pending"]

    async with (
        serving(doc, ENV) as server,
        running_worker(doc, ENV) as parts,
        confirming(doc, ENV),
    ):
        await open_merchant(parts, LEDGER_MERCHANT, "TRY")
        await wait_until(lambda: ended(database_url, 1))
        assert await merchant_balance(parts, LEDGER_MERCHANT, "TRY") == 15_050
        (first,) = api.requests
        assert first.refused is None and first.body == detail_body("31000001")
        assert first.headers["content-type"] == "application/json"
        assert authorization_problem(first.headers, DETAIL_PATH, first.body, API_KEY,
                                     SECRET_KEY) is None  # fmt: skip

        # iyzico notifies again (it retries until it reads a 2xx, and may anyway): a
        # duplicate, fetched again, which records and settles nothing more.
        assert await accepted(server, webhook) == "duplicate"
        await wait_until(partial(_fetched, api, 2))
        await wait_until(partial(_states_are, database_url, ["confirmed"]))
        await asyncio.sleep(0.5)  # room for a second settlement, were one coming
        assert await merchant_balance(parts, LEDGER_MERCHANT, "TRY") == 15_050
        assert await merchant_balance(parts, LEDGER_MERCHANT, "USD") is None  # nothing converted

    assert await settled(database_url, "iyzico") == [("capture", None, 15_050, LEDGER_MERCHANT)]
    assert await recorded(database_url) == [
        (webhook["iyziReferenceCode"], None, "live"),  # the webhook itself is never published
        ("31000001:paid", "webhooks.iyzico.payment.paid", "confirmed"),
    ]
    assert await dead_letters(database_url) == []
    assert [r.refused for r in api.requests] == [None, None]
    assert [r.body for r in api.requests] == [detail_body("31000001")] * 2
    keys = [r.random_key for r in api.requests]
    assert len(set(keys)) == 2, keys  # a fresh random key for each request


async def test_a_pre_authorisation_then_its_capture_move_the_money_once(
    doc: dict[str, Any], database_url: str, api: IyzicoApi
) -> None:
    """A pre-auth is an authorisation (reserved, not in the balance); once captured
    (post-auth) iyzico notifies again and the capture takes the reservation."""
    api.pay("31000003", "80.00", phase="PRE_AUTH", conversation_id="conv-3")
    webhook = direct("31000003", "conv-3")
    async with (
        serving(doc, ENV) as server,
        running_worker(doc, ENV) as parts,
        confirming(doc, ENV),
    ):
        await open_merchant(parts, LEDGER_MERCHANT, "TRY")
        assert await accepted(server, webhook) == "accepted"
        await wait_until(lambda: ended(database_url, 1))
        assert await merchant_balance(parts, LEDGER_MERCHANT, "TRY") == 0

        api.post_auth("31000003")
        assert await accepted(server, direct("31000003", "conv-3")) == "accepted"
        await wait_until(lambda: ended(database_url, 2))
        assert await merchant_balance(parts, LEDGER_MERCHANT, "TRY") == 8_000
    assert await published(database_url) == ["31000003:authorized", "31000003:paid"]
    assert await settled(database_url, "iyzico") == [
        ("authorisation", "31000003", 8_000, LEDGER_MERCHANT),
        ("capture", None, 8_000, LEDGER_MERCHANT),
    ]


# --- (c): a tampered webhook --------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "field", "value"),
    [(direct, "paymentId", 31000099), (direct, "status", "FAILURE"),
     (direct, "paymentConversationId", "conv-2"), (direct, "iyziEventType", "THREE_DS_AUTH"),
     (checkout_form, "iyziPaymentId", 31000099), (checkout_form, "token", "forged")],
)  # fmt: skip
async def test_a_webhook_with_a_signed_field_changed_is_refused_and_nothing_is_stored(
    doc: dict[str, Any], database_url: str, api: IyzicoApi, shape: Any, field: str, value: Any
) -> None:
    api.pay("31000001", "150.50")
    genuine = shape("31000001")
    async with serving(doc, ENV) as server, confirming(doc, ENV):
        answer = await post(server, {**genuine, field: value}, v3_signature(genuine))
        assert answer.status_code == 401, answer.text
        # Signed with another secretKey: refused alike.
        other = await post(server, genuine, v3_signature(genuine, "another-secret"))
        assert other.status_code == 401, other.text
        await asyncio.sleep(0.3)  # room for a fetch, were one owed
    assert await recorded(database_url) == []
    assert await states(database_url) == []
    assert api.requests == []


# --- (d): an answer that is not this payment's, a fetch refused -------------------------------


@pytest.mark.parametrize(
    ("fault", "error_class"),
    [("answer signed with another key", "CONFIRMATION_MISMATCH"),
     ("another payment's answer", "CONFIRMATION_MISMATCH"),
     ("request refused, answered 200", "PAYLOAD_INVALID"),
     ("request refused, answered 401", "CONFIRMATION_ATTEMPTS_EXHAUSTED")],
)  # fmt: skip
async def test_an_answer_not_this_payments_is_parked_and_settles_once_replayed(
    doc: dict[str, Any], database_url: str, api: IyzicoApi, tmp_path: Path, fault: str,
    error_class: str,
) -> None:  # fmt: skip
    """Nothing an unsigned, foreign or refused answer says moves money: the webhook is
    parked at `confirm` with the class the confirm stage gives it; once mended, a
    replay fetches it again and it settles once."""
    api.pay("31000001", "150.50", conversation_id="conv-1")
    api.pay("31000002", "9999.00", conversation_id="conv-1")  # another, larger payment
    env = ENV
    if fault == "answer signed with another key":
        api.sign_wrongly("31000001")
    elif fault == "another payment's answer":
        api.answer_as("31000001", "31000002")
    else:  # the gateway holds another account's API key: iyzico cannot verify the request
        env = {KEY_ENV: "sandbox-someone-elses-api-key"}
        api.refusal_status = 200 if fault.endswith("200") else 401
    webhook = direct("31000001")
    async with (
        serving(doc, ENV) as server,
        running_worker(doc, ENV) as parts,
        confirming(doc, env),
    ):
        await open_merchant(parts, LEDGER_MERCHANT, "TRY")
        assert await accepted(server, webhook) == "accepted"
        await wait_until(partial(_states_are, database_url, ["parked"]))
        assert await dead_letters(database_url) == [
            (webhook["iyziReferenceCode"], "confirm", error_class)
        ]
        assert await published(database_url) == []
        refused = {r.refused for r in api.requests}
        assert refused == ({None} if env is ENV else {"another apiKey"}), refused

    # Mended: iyzico signs and answers as it should; the key is the account's.
    api.sign_wrongly("31000001", None)
    api.answer_as("31000001", None)
    replayed = await run_gateway(tmp_path, doc, ENV, "dlq", "replay", "--all", "--stage",
                                 "confirm")  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr
    # The gateway serving too: its outbox relay publishes what the confirm stage records.
    async with serving(doc, ENV), running_worker(doc, ENV) as parts, confirming(doc, ENV):
        await wait_until(partial(_states_are, database_url, ["confirmed"]))
        await wait_until(lambda: _settled_count(database_url, 1))
        assert await merchant_balance(parts, LEDGER_MERCHANT, "TRY") == 15_050
    assert await dead_letters(database_url) == []
    assert await published(database_url) == ["31000001:paid"]
    assert await settled(database_url, "iyzico") == [("capture", None, 15_050, LEDGER_MERCHANT)]


async def _settled_count(dsn: str, n: int) -> bool:
    rows = await fetch(dsn, "SELECT count(*) AS n FROM settlements WHERE state = 'settled'")
    return int(rows[0]["n"]) >= n


# --- (e): a refund told by an internal service ----------------------------------------------


async def refund(
    server: RunningServer, key: str, payment_id: str, amount_minor: int
) -> httpx.Response:
    """iyzico sends no webhook for a refund: the merchant's own service tells it."""
    data = {"settlement_id": payment_id, "amount_minor": amount_minor, "currency": "TRY",
            "refund_id": f"{payment_id}_{key}"}  # fmt: skip
    return await server.client.post(
        "/v1/events",
        json={"type": "payment.refunded", "data": data},
        headers={"Authorization": f"Bearer {BILLING_TOKEN}", "Idempotency-Key": key},
    )


async def test_a_refund_told_by_an_internal_service_nets_against_the_payment(
    doc: dict[str, Any], database_url: str, api: IyzicoApi
) -> None:
    """150.50 TRY paid, 50.00 refunded by the merchant's service (told twice): the
    balance is 100.50 TRY. A refund larger than the payment is parked, not guessed (a
    refund judged alone: `core.settlement.follow_ups` lets a sum of refunds pass the
    capture, since a reversal may still be on its way)."""
    api.pay("31000001", "150.50", conversation_id="conv-1")
    async with (
        serving(doc, ENV) as server,
        running_worker(doc, ENV) as parts,
        confirming(doc, ENV),
    ):
        await open_merchant(parts, LEDGER_MERCHANT, "TRY")
        assert await accepted(server, direct("31000001")) == "accepted"
        await wait_until(lambda: ended(database_url, 1))

        first = await refund(server, "rf1", "31000001", 5_000)
        assert first.json() == {"status": "accepted", "event_id": "rf1"}
        again = await refund(server, "rf1", "31000001", 5_000)
        assert again.json() == {"status": "duplicate", "event_id": "rf1"}
        await wait_until(lambda: ended(database_url, 2))
        assert await merchant_balance(parts, LEDGER_MERCHANT, "TRY") == 10_050

        too_much = await refund(server, "rf2", "31000001", 15_051)
        assert too_much.status_code == 200, too_much.text
        await wait_until(lambda: ended(database_url, 3))
        assert await merchant_balance(parts, LEDGER_MERCHANT, "TRY") == 10_050
    assert [d[1:] for d in await dead_letters(database_url)] == [("settlement", "EXCEEDS_PAYMENT")]
    assert await settled(database_url, "iyzico") == [("capture", None, 15_050, LEDGER_MERCHANT)]
    rows = await fetch(database_url, "SELECT kind, refund_id, amount_minor, merchant_id"
                                     " FROM settlements WHERE provider = 'service:billing'"
                                     " AND state = 'settled'")  # fmt: skip
    assert [tuple(r) for r in rows] == [("refund", "31000001_rf1", 5_000, LEDGER_MERCHANT)]


# --- (f): the API down for a while ------------------------------------------------------------


async def test_an_api_that_is_down_leaves_the_webhook_waiting_and_confirms_it_once(
    doc: dict[str, Any], database_url: str, api: IyzicoApi
) -> None:
    doc["confirm"]["max_attempts"] = 1000  # an outage is waited out, never parked
    api.pay("31000001", "150.50", conversation_id="conv-1")
    api.down = True
    async with (
        serving(doc, ENV) as server,
        running_worker(doc, ENV) as parts,
        confirming(doc, ENV) as metrics,
    ):
        await open_merchant(parts, LEDGER_MERCHANT, "TRY")
        assert await accepted(server, direct("31000001")) == "accepted"
        await wait_until(partial(_fetched, api, 3))
        assert await states(database_url) == ["pending"]
        assert metrics.confirm_fetches_total.get(outcome="retry", provider="iyzico") >= 3
        assert await published(database_url) == []

        api.down = False
        await wait_until(partial(_states_are, database_url, ["confirmed"]))
        await wait_until(lambda: ended(database_url, 1))
        assert await merchant_balance(parts, LEDGER_MERCHANT, "TRY") == 15_050
    assert [r.refused for r in api.requests].count(None) == 1  # confirmed by one answer
    assert {r.refused for r in api.requests} == {None, "down"}
    keys = [r.random_key for r in api.requests]
    assert len(set(keys)) == len(keys)  # each try signed afresh
    assert await published(database_url) == ["31000001:paid"]
    assert await settled(database_url, "iyzico") == [("capture", None, 15_050, LEDGER_MERCHANT)]
    assert await dead_letters(database_url) == []


# --- whose money: the merchant ------------------------------------------------------------


async def test_a_webhook_naming_no_merchant_settles_to_the_configured_one(
    doc: dict[str, Any], database_url: str, api: IyzicoApi
) -> None:
    """`[providers.iyzico] merchant_id` is the merchant of a payment whose webhook names
    no `merchantId`."""
    api.pay("31000001", "10.00", conversation_id="conv-1")
    async with (
        serving(doc, ENV) as server,
        running_worker(doc, ENV) as parts,
        confirming(doc, ENV),
    ):
        await open_merchant(parts, MERCHANT, "TRY")
        assert await accepted(server, direct("31000001", merchantId=None)) == "accepted"
        await wait_until(lambda: ended(database_url, 1))
        assert await merchant_balance(parts, MERCHANT, "TRY") == 1_000
    assert await settled(database_url, "iyzico") == [("capture", None, 1_000, MERCHANT)]


async def test_with_the_account_pinned_a_webhook_naming_another_is_refused(
    doc: dict[str, Any], database_url: str, api: IyzicoApi
) -> None:
    """`merchantId` is not among the fields a payment's webhook signs: with
    `iyzico_merchant_id` set, a genuine webhook whose `merchantId` was changed is
    refused before anything is stored or fetched."""
    doc["providers"]["iyzico"]["iyzico_merchant_id"] = IYZICO_MID
    api.pay("31000001", "10.00", conversation_id="conv-1")
    genuine = direct("31000001")
    async with serving(doc, ENV) as server, confirming(doc, ENV):
        moved = await post(server, {**genuine, "merchantId": 999}, v3_signature(genuine))
        assert moved.status_code == 401, moved.text
        await asyncio.sleep(0.3)  # room for a fetch, were one owed
    assert await recorded(database_url) == [] and api.requests == []


async def test_merchant_id_names_every_payment_of_the_account(
    doc: dict[str, Any], database_url: str, api: IyzicoApi
) -> None:
    """With `merchant_id` set and no `iyzico_merchant_id` (the configuration the
    documentation offers for "the merchant every payment of the account is"), every
    payment settles to it: one whose webhook names the account as iyzico sends it, and
    one whose genuine webhook was re-posted under a new `iyziReferenceCode` with another
    `merchantId` (neither is signed): nobody who posts a webhook chooses whose money
    it is."""
    api.pay("31000001", "10.00", conversation_id="conv-1")
    api.pay("31000002", "20.00", conversation_id="conv-1")
    genuine = direct("31000002")
    moved = {**genuine, "merchantId": 999, "iyziReferenceCode": str(uuid.uuid4())}
    async with (
        serving(doc, ENV) as server,
        running_worker(doc, ENV) as parts,
        confirming(doc, ENV),
    ):
        for merchant in (MERCHANT, IYZICO_MID, "999"):
            await open_merchant(parts, merchant, "TRY")
        assert await accepted(server, direct("31000001")) == "accepted"
        answer = await post(server, moved, v3_signature(genuine))  # verifies: unsigned fields
        assert answer.status_code == 200, answer.text
        await wait_until(lambda: ended(database_url, 2))
        balances = {m: await merchant_balance(parts, m, "TRY") for m in (MERCHANT, IYZICO_MID,
                                                                        "999")}  # fmt: skip
    assert balances == {MERCHANT: 3_000, IYZICO_MID: 0, "999": 0}, balances


# --- the stand-in, held to iyzico's own library --------------------------------------------------


def _iyzipay_retrieve(api: IyzicoApi, secret: str, payment_id: str) -> tuple[int, Any]:
    """`iyzipay.Payment().retrieve` (iyzipay 1.0.46) against the stand-in, over http
    (the library speaks https only; its connection class is swapped, nothing else)."""
    iyzipay = pytest.importorskip("iyzipay")
    resource = iyzipay.Payment()
    resource.httplib = types.SimpleNamespace(HTTPSConnection=http.client.HTTPConnection)
    options = {"api_key": API_KEY, "secret_key": secret, "base_url": api.url[len("http://") :]}
    request = {"locale": "en", "conversationId": "conv-1", "paymentId": payment_id}
    answer = resource.retrieve(request, options)
    return answer.status, json.loads(answer.read())


async def test_the_stand_in_takes_iyzipays_request_and_its_answer_verifies_as_iyzipays_does(
    api: IyzicoApi,
) -> None:
    """The stand-in checks requests and signs answers as iyzico does, by iyzico's own
    library: its request (its JSON spelling, its random key) is taken, one signed with
    another secretKey is refused with 1000, and the answer's `signature` is the one
    iyzipay's `samples/retrieve_payment_result.py` computes from it."""
    library = pytest.importorskip("iyzipay.iyzipay_resource")
    api.pay("31000001", "150.50", "140.00", conversation_id="conv-1")
    status, answer = await asyncio.to_thread(_iyzipay_retrieve, api, SECRET_KEY, "31000001")
    assert status == 200 and answer["status"] == "success", answer
    assert api.requests[-1].refused is None
    assert api.requests[-1].body.startswith(b'{"locale": "en"')  # json.dumps's spelling
    resource = library.IyzipayResource
    expected = resource.calculate_hmac_sha256_signature(
        [answer["paymentId"], answer["currency"], answer["basketId"], answer["conversationId"],
         resource.strip_zero(str(answer["paidPrice"])), resource.strip_zero(str(answer["price"]))],
        SECRET_KEY,
    )  # fmt: skip
    assert answer["signature"] == expected
    assert (answer["paidPrice"], answer["price"], answer["paymentId"]) == (150.5, 140.0, "31000001")

    status, refused = await asyncio.to_thread(_iyzipay_retrieve, api, "wrong-secret", "31000001")
    assert (status, refused["status"], refused["errorCode"]) == (200, "failure", "1000")
    assert api.requests[-1].refused == "a signature the secretKey does not make over this body"
