"""Zarinpal end to end: a payer's browser back at `GET /callbacks/zarinpal` on a real
gateway, the payment verified by the confirm stage against a local stand-in of
Zarinpal's API, and settled in rials by the real worker on PostgreSQL, NATS JetStream
and Redis (balances per currency: the rials stay rials).

A paid callback is verified once and settles once, however often the browser comes
back; a callback with a forged Authority, or an order signed with another secret,
settles nothing; an amount that is not the payment's is parked as
`VERIFY_AMOUNT_MISMATCH` and never verified; an order in tomans settles as ten times as many rials;
an API down past Zarinpal's deadline parks the payment as `VERIFY_DEADLINE_PASSED`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from gateway import settings as settings_mod
from gateway.backfill.run import BackfillReport, backfill
from gateway.core.backfill.decisions import Window
from gateway.core.signatures.base import SchemeParams
from gateway.core.signatures.zarinpal import order_signature
from gateway.wiring.backfill import backfill_parts
from tests.integration.providers.test_hmac_providers_end_to_end import ended, settled
from tests.support.confirming import QUICK, confirming, serving
from tests.support.gateway import RunningServer, config
from tests.support.services import wait_until
from tests.support.settlement import (
    fetch,
    merchant_balance,
    open_merchant,
    running_worker,
    settlement_sections,
)
from tests.support.stub import Stub
from tests.support.zarinpal_api import MERCHANT_ID, ZarinpalApi, running_zarinpal_api

MERCHANT = "m_tehran"
SECRET = "zp-order-secret"
KEY_ENV = "ZARINPAL_MERCHANT_ID"
ENV = {KEY_ENV: MERCHANT_ID}
RETURN_URL = "https://shop.example/payment/done?lang=fa"


@pytest.fixture(params=[200, 422], ids=["refusals-as-200", "refusals-as-422"])
async def api(request: pytest.FixtureRequest) -> Any:
    async with running_zarinpal_api(refusal_status=request.param) as running:
        yield running


@pytest.fixture
def doc(database_url: str, nats_url: str, stub: Stub, redis_url: str, api: ZarinpalApi) -> Any:
    sections = settlement_sections(stub.url, redis_url, settlement={"balances": "per_currency"})
    found = config(database_url, nats_url, **sections)
    found["providers"]["zarinpal"] = {
        "scheme": "zarinpal", "secrets": [SECRET], "return_url": RETURN_URL,
        "api_key_env": KEY_ENV, "api_url": api.url, "insecure_api_url": True,
        "api_hosts": ["127.0.0.1"],
    }  # fmt: skip
    found["confirm"] = dict(QUICK, max_attempts=4)
    return found


def order(
    order_id: str, amount: int, currency: str = "IRR", secret: str = SECRET
) -> dict[str, str]:
    fields = {"order": order_id, "amount": str(amount), "currency": currency, "merchant": MERCHANT}
    return {**fields, "sig": order_signature(secret, fields)}


def callback_url(signed: dict[str, str]) -> str:
    """The callback URL the merchant gave Zarinpal for the order, as Zarinpal keeps it."""
    return f"https://gateway.example/callbacks/zarinpal?{urlencode(signed)}"


async def come_back(
    server: RunningServer, signed: dict[str, str], authority: str, status: str = "OK"
) -> httpx.Response:
    """The payer's browser at the callback URL, as Zarinpal sends it back."""
    query = urlencode({**signed, "Authority": authority, "Status": status})
    return await server.client.get(f"/callbacks/zarinpal?{query}")


async def dead_letters(dsn: str) -> list[tuple[str, str, str]]:
    rows = await fetch(dsn, "SELECT event_id, stage, error_class FROM dlq_webhooks ORDER BY id")
    return [(r["event_id"], r["stage"], r["error_class"]) for r in rows]


async def published(dsn: str) -> list[tuple[str, str | None]]:
    rows = await fetch(dsn, "SELECT event_id, subject FROM processed_webhooks"
                            " WHERE provider = 'zarinpal' ORDER BY id")  # fmt: skip
    return [(r["event_id"], r["subject"]) for r in rows]


AUTH = "A00000000000000000000000000000123456"
FORGED = "A0000000000000000000000000000000FAKE"


async def test_a_paid_callback_is_verified_once_and_settles_once_in_rials(
    doc: dict[str, Any], database_url: str, api: ZarinpalApi
) -> None:
    signed = order("o_1", 1_500_000)
    api.pay(AUTH, 1_500_000, callback_url(signed))
    async with serving(doc, ENV) as server, running_worker(doc, ENV) as parts, confirming(doc, ENV):
        await open_merchant(parts, MERCHANT, "IRR")
        first = await come_back(server, signed, AUTH)
        assert first.status_code == 303
        assert first.headers["location"] == f"{RETURN_URL}&order=o_1&status=OK"
        await wait_until(lambda: ended(database_url, 1))
        # The payer reloads the page: a duplicate, whose payment is no longer in the list
        # of those paid and not verified: nothing verified again, nothing settled again.
        vouches = api.unverified_asked
        again = await come_back(server, signed, AUTH)
        assert again.status_code == 303
        await wait_until(lambda: _more_vouches(api, vouches))
        await wait_until(lambda: _all_confirmed(database_url))
        assert await merchant_balance(parts, MERCHANT, "IRR") == 150_000_000  # 1.5M rials
    assert api.verifies == [{"merchant_id": MERCHANT_ID, "amount": 1_500_000, "authority": AUTH}]
    assert await settled(database_url, "zarinpal") == [("capture", None, 150_000_000, MERCHANT)]
    assert await published(database_url) == [
        (f"{AUTH}:order:o_1", None),  # the callback itself is never published
        (f"{AUTH}:verified", "webhooks.zarinpal.payment.verified"),
    ]
    assert await dead_letters(database_url) == []


async def _verifies(api: ZarinpalApi, n: int) -> bool:
    return len(api.verifies) >= n


async def _more_vouches(api: ZarinpalApi, than: int) -> bool:
    return api.unverified_asked > than


async def _all_confirmed(dsn: str) -> bool:
    rows = await fetch(dsn, "SELECT state FROM confirmations")
    return bool(rows) and {r["state"] for r in rows} == {"confirmed"}


async def test_an_order_in_tomans_settles_as_rials_times_ten(
    doc: dict[str, Any], database_url: str, api: ZarinpalApi
) -> None:
    signed = order("o_t", 25_000, "IRT")
    api.pay(AUTH, 25_000, callback_url(signed))  # 25,000 tomans, as the merchant asked
    async with serving(doc, ENV) as server, running_worker(doc, ENV) as parts, confirming(doc, ENV):
        await open_merchant(parts, MERCHANT, "IRR")
        assert (await come_back(server, signed, AUTH)).status_code == 303
        await wait_until(lambda: ended(database_url, 1))
        assert await merchant_balance(parts, MERCHANT, "IRR") == 25_000 * 10 * 100
    assert api.verifies[0]["amount"] == 25_000  # verified in the order's own unit
    assert await settled(database_url, "zarinpal") == [("capture", None, 25_000_000, MERCHANT)]


async def test_forged_callbacks_settle_nothing(
    doc: dict[str, Any], database_url: str, api: ZarinpalApi
) -> None:
    api.pay(AUTH, 1_000, callback_url(order("o_x", 1_000)))
    async with serving(doc, ENV) as server, running_worker(doc, ENV), confirming(doc, ENV):
        # An Authority Zarinpal never issued: not in its list of payments paid and not
        # verified, so nothing is verified and nothing parked.
        forged = await come_back(server, order("o_f", 1_000), FORGED)
        assert forged.status_code == 303
        # An order signed with another secret, or tampered after signing: refused.
        other = await come_back(server, order("o_x", 1_000, secret="not-ours"), AUTH)
        tampered = {**order("o_x", 1_000), "amount": "10"}
        assert other.status_code == 401
        assert (await come_back(server, tampered, AUTH)).status_code == 401
        # A NOK for the genuine Authority: recorded apart, verifies nothing.
        assert (await come_back(server, order("o_x", 1_000), AUTH, "NOK")).status_code == 303
        await wait_until(lambda: _all_confirmed(database_url))
    assert await dead_letters(database_url) == []
    assert api.verifies == [] and api.unverified_asked == 1
    assert await settled(database_url, "zarinpal") == []
    nok = (f"{AUTH}:order:o_x:NOK", "webhooks.zarinpal.callback.nok")
    assert nok in await published(database_url)
    assert not api.verified(AUTH)


async def test_an_amount_that_is_not_the_payments_is_parked_and_never_verified(
    doc: dict[str, Any], database_url: str, api: ZarinpalApi
) -> None:
    signed = order("o_m", 1_000_000)
    api.pay(AUTH, 2_000_000, callback_url(signed))  # paid 2M; the merchant's order says 1M
    async with serving(doc, ENV) as server, running_worker(doc, ENV), confirming(doc, ENV):
        assert (await come_back(server, signed, AUTH)).status_code == 303
        await wait_until(lambda: ended(database_url, 1))
    assert await dead_letters(database_url) == [
        (f"{AUTH}:order:o_m", "confirm", "VERIFY_AMOUNT_MISMATCH")
    ]
    assert not api.verified(AUTH)
    assert await settled(database_url, "zarinpal") == []


async def test_an_api_down_past_the_deadline_parks_the_payment(
    doc: dict[str, Any], database_url: str, api: ZarinpalApi
) -> None:
    # A deadline of two seconds stands for Zarinpal's fifteen minutes.
    doc["providers"]["zarinpal"]["verify_deadline_s"] = 2
    doc["confirm"]["max_attempts"] = 1000
    signed = order("o_d", 1_000)
    api.pay(AUTH, 1_000, callback_url(signed))
    api.verify_down = True
    async with serving(doc, ENV) as server, confirming(doc, ENV):
        assert (await come_back(server, signed, AUTH)).status_code == 303
        await wait_until(lambda: _parked(database_url), timeout_s=20)
    assert await dead_letters(database_url) == [
        (f"{AUTH}:order:o_d", "confirm", "VERIFY_DEADLINE_PASSED")
    ]
    assert len(api.verifies) >= 2  # retried within the deadline
    rows = await fetch(database_url, "SELECT error_message FROM dlq_webhooks")
    assert rows[0]["error_message"].endswith("the provider's inquiry says: PAID")


async def test_a_signed_order_sent_with_another_payments_authority_takes_nothing(
    doc: dict[str, Any], database_url: str, api: ZarinpalApi
) -> None:
    """The Authority is not signed: someone holding a signed order of their own (the URL
    their browser was sent to) sends it with another payer's Authority, of the same
    amount, before that payer comes back. Zarinpal's list of unverified payments says
    which order the Authority was paid for: the pairing is parked, nothing verified, and
    the genuine callback, keyed apart, is verified and settled to its own merchant."""
    genuine = order("o_victim", 500_000)
    forged = {**order("o_evil", 500_000)}
    api.pay(AUTH, 500_000, callback_url(genuine))
    async with serving(doc, ENV) as server, running_worker(doc, ENV) as parts, confirming(doc, ENV):
        await open_merchant(parts, MERCHANT, "IRR")
        assert (await come_back(server, forged, AUTH)).status_code == 303
        await wait_until(lambda: _parked(database_url))
        assert api.verifies == []
        assert (await come_back(server, genuine, AUTH)).status_code == 303
        await wait_until(lambda: ended(database_url, 2))
        assert await merchant_balance(parts, MERCHANT, "IRR") == 50_000_000
    assert await dead_letters(database_url) == [
        (f"{AUTH}:order:o_evil", "confirm", "CONFIRMATION_MISMATCH")
    ]
    assert [v["authority"] for v in api.verifies] == [AUTH]
    assert await settled(database_url, "zarinpal") == [("capture", None, 50_000_000, MERCHANT)]


async def test_no_card_data_is_kept_of_the_verify_answer(
    doc: dict[str, Any], database_url: str, api: ZarinpalApi
) -> None:
    signed = order("o_card", 1_000)
    api.pay(AUTH, 1_000, callback_url(signed))
    async with serving(doc, ENV) as server, confirming(doc, ENV):
        assert (await come_back(server, signed, AUTH)).status_code == 303
        await wait_until(lambda: _all_confirmed(database_url))
    rows = await fetch(database_url, "SELECT answer FROM confirmations")
    kept = rows[0]["answer"]
    assert b'"ref_id"' in kept and b"card_pan" not in kept and b"card_hash" not in kept
    assert b"502229" not in kept


async def test_an_over_long_callback_is_refused_before_anything_is_recorded(
    doc: dict[str, Any], database_url: str
) -> None:
    async with serving(doc, ENV) as server:
        query = urlencode({**order("o_long", 1_000), "Authority": AUTH, "Status": "OK"})
        answer = await server.client.get(f"/callbacks/zarinpal?{query}&pad={'x' * 2100}")
        assert answer.status_code == 414
    assert await published(database_url) == []


async def _parked(dsn: str) -> bool:
    return bool(await dead_letters(dsn))


def test_the_signed_order_is_what_gateway_sign_writes() -> None:
    from gateway.core.providers.zarinpal import sign_callback

    body = b"order=o_1&amount=1000&currency=IRR&merchant=m_tehran"
    signed = sign_callback(SchemeParams(secrets=(SECRET,)), body)
    assert signed.endswith(order("o_1", 1000)["sig"].encode())


async def recover(doc: dict[str, Any]) -> BackfillReport:
    """One pass of `gateway backfill zarinpal`: the payments paid and not verified."""
    settings = settings_mod.parse(doc, env=ENV)
    now = datetime.now(UTC).replace(microsecond=0)
    async with backfill_parts(settings, "zarinpal") as parts:
        return await backfill(parts, Window(now - timedelta(hours=1), now))


async def test_a_payment_whose_payer_never_came_back_is_found_and_settled_once(
    doc: dict[str, Any], database_url: str, api: ZarinpalApi
) -> None:
    """The payer closed the browser at Zarinpal's page: no callback. The list of
    payments paid and not verified holds it, with the callback URL the merchant signed;
    the recovery records it as its callback, verifies it once and settles it once. A
    payment from another integration of the merchant id (no order in its URL) is
    parked; the callback arriving late after all is a duplicate."""
    signed = order("o_lost", 730_000)
    api.pay(AUTH, 730_000, callback_url(signed))
    api.pay(FORGED, 5_000, "https://shop.example/their-own-callback?id=9")
    async with serving(doc, ENV) as server, running_worker(doc, ENV) as parts, confirming(doc, ENV):
        await open_merchant(parts, MERCHANT, "IRR")
        await recover(doc)
        await wait_until(lambda: ended(database_url, 2))
        assert await merchant_balance(parts, MERCHANT, "IRR") == 73_000_000
        await recover(doc)  # verified now: no longer listed, nothing recorded again
        assert (await come_back(server, signed, AUTH)).status_code == 303  # late: a duplicate
        await wait_until(lambda: _more_vouches(api, 2))  # no longer listed: not verified again
        await wait_until(lambda: _all_confirmed(database_url))
    assert await settled(database_url, "zarinpal") == [("capture", None, 73_000_000, MERCHANT)]
    assert [v["authority"] for v in api.verifies] == [AUTH]
    assert [(s, c) for _, s, c in await dead_letters(database_url)] == [
        ("ingest", "SIGNATURE_MISSING")  # the other integration's payment: no signed order
    ]
