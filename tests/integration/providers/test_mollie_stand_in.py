"""The stand-in of Mollie's payments API (`tests.support.mollie_api`) answers as Mollie
does, fetched over http with httpx: what the confirm stage's tests rely on it for, and
that its answers read into the changes the `mollie` provider expects."""

from __future__ import annotations

import asyncio

import httpx

from gateway.core.providers.mollie.answer import confirmed
from gateway.core.providers.mollie.classic import auth, document, locate
from tests.support.mollie_api import (
    API_KEY,
    MEDIA_TYPE,
    huge,
    redirect,
    running_mollie_api,
    slow,
    stand_in_keys,
)

AUTH = auth(API_KEY)
PATH = "/v2/payments/tr_life?embed=refunds,chargebacks"


async def test_a_payment_is_answered_with_its_refunds_and_chargebacks() -> None:
    """The fetch the provider asks for, with its key: the payment with its changes, in
    the order they were made, read by the provider into those changes."""
    async with running_mollie_api() as api, httpx.AsyncClient(base_url=api.url) as client:
        api.pay("tr_life", "100.00", "USD", metadata={"merchant_id": "m_1"})
        api.refund("tr_life", "re_one", "20.00", status="processing")
        api.chargeback("tr_life", "chb_one", "50.00")
        api.refund("tr_life", "re_one", "20.00")  # now refunded: the same refund
        api.chargeback("tr_life", "chb_one", "50.00", reversed=True)
        answer = await client.get(locate(document(b"id=tr_life")), headers=AUTH)
        bare = await client.get("/v2/payments/tr_life", headers=AUTH)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith(MEDIA_TYPE)
    doc = answer.json()
    assert (doc["resource"], doc["id"], doc["status"]) == ("payment", "tr_life", "paid")
    assert doc["amount"] == {"value": "100.00", "currency": "USD"}
    assert [r["status"] for r in doc["_embedded"]["refunds"]] == ["refunded"]
    assert doc["_embedded"]["chargebacks"][0]["reversedAt"] is not None
    assert "_embedded" not in bare.json()  # nothing embedded unless asked for
    assert [c.event_id for c in confirmed({"id": "tr_life", "type": "payment.webhook"}, doc)] == [
        "tr_life:paid",
        "tr_life:refund:re_one",
        "tr_life:chargeback:chb_one",
        "tr_life:chargeback:chb_one:reversed",
    ]
    assert api.requests == [PATH, "/v2/payments/tr_life"]


async def test_refusals_and_faults_are_mollies() -> None:
    """401 without the key, 404 for an unknown payment (Mollie's error JSON), 503 while
    down, and queued failures with their Retry-After, each before the payment."""
    async with running_mollie_api() as api, httpx.AsyncClient(base_url=api.url) as client:
        api.pay("tr_x")
        unauthorised = await client.get("/v2/payments/tr_x", headers=auth("test_wrong"))
        unknown = await client.get("/v2/payments/tr_forged", headers=AUTH)
        api.down = True
        down = await client.get("/v2/payments/tr_x", headers=AUTH)
        api.down = False
        api.fail_next(2, status=429, retry_after=3)
        failed = [(await client.get("/v2/payments/tr_x", headers=AUTH)) for _ in range(2)]
        mended = await client.get("/v2/payments/tr_x", headers=AUTH)
    assert unauthorised.status_code == 401 and unauthorised.json()["status"] == 401
    assert unknown.status_code == 404
    assert unknown.json()["detail"] == "No payment exists with token tr_forged."
    assert down.status_code == 503
    assert [(f.status_code, f.headers["retry-after"]) for f in failed] == [(429, "3"), (429, "3")]
    assert mended.status_code == 200
    assert api.authorizations[0] == "Bearer test_wrong"


async def test_hostile_answers_are_given_as_built() -> None:
    """Another payment's answer, a redirect, a huge and a slow body; cleared, the
    payment's own again."""
    async with running_mollie_api() as api, httpx.AsyncClient(base_url=api.url) as client:
        api.pay("tr_x")
        api.pay("tr_other", "99.00")
        api.answer_with("tr_x", api.payment_response("tr_other"))
        other = await client.get("/v2/payments/tr_x", headers=AUTH)
        api.answer_with("tr_x", redirect("https://evil.example/x"))
        moved = await client.get("/v2/payments/tr_x", headers=AUTH)
        api.answer_with("tr_x", huge(1 << 20))
        large = await client.get("/v2/payments/tr_x", headers=AUTH)
        api.answer_with("tr_x", slow(b'{"id":"tr_x"}', 0.01))
        trickled = await client.get("/v2/payments/tr_x", headers=AUTH)
        api.answer_with("tr_x", None)
        own = await client.get("/v2/payments/tr_x", headers=AUTH)
    assert other.json()["id"] == "tr_other"
    assert (moved.status_code, moved.headers["location"]) == (302, "https://evil.example/x")
    assert len(large.content) >= 1 << 20
    assert trickled.json() == {"id": "tr_x"}
    assert own.json()["id"] == "tr_x"


async def test_concurrent_fetches_are_counted() -> None:
    async with (
        running_mollie_api(delay_s=0.2) as api,
        httpx.AsyncClient(base_url=api.url) as client,
    ):
        api.pay("tr_x")
        answers = await asyncio.gather(
            *(client.get("/v2/payments/tr_x", headers=AUTH) for _ in range(5))
        )
    assert {a.status_code for a in answers} == {200}
    assert api.in_flight_max == 5


def test_the_keys_point_the_gateway_at_the_stand_in() -> None:
    assert stand_in_keys("http://127.0.0.1:1", "MOLLIE_TEST_KEY") == {
        "api_key_env": "MOLLIE_TEST_KEY",
        "api_url": "http://127.0.0.1:1",
        "insecure_api_url": True,
        "api_hosts": ["127.0.0.1"],
    }
