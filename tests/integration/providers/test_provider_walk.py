"""Every registered provider, walked through sign → verify → record → settle → forward.

A provider added to the registry without a sample here fails by name; one whose
pieces do not fit (a scheme `gateway sign --provider` cannot sign, an id the gateway
cannot read, a capture its movements cannot settle, an event the forwarder cannot
deliver) fails at that step, naming the provider.

A provider whose webhooks are confirmed (`Provider.confirmation`: Mollie, GoCardless's
amounts, Stripe's thin events) walks one step more: its webhook is recorded and never
published, the confirm stage fetches what it names from a stand-in of the provider's
API, and the event that answer holds is the one published, settled and forwarded.
"""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import orjson
import pytest

from gateway.cli import main as gateway_main
from gateway.core.forward.request import ForwardedEvent, ResignAs, delivery_request
from gateway.core.providers import PROVIDERS, get_scheme
from gateway.core.signatures import SchemeParams
from gateway.core.signatures.zarinpal import order_signature
from tests.support.config_file import write_toml
from tests.support.confirming import QUICK, confirming, serving
from tests.support.gateway import config
from tests.support.gocardless_api import API_KEY as GOCARDLESS_API_KEY
from tests.support.gocardless_api import running_gocardless_api
from tests.support.iyzico_api import API_KEY as IYZICO_API_KEY
from tests.support.iyzico_api import SECRET_KEY as IYZICO_SECRET_KEY
from tests.support.iyzico_api import running_iyzico_api
from tests.support.mollie_api import API_KEY as MOLLIE_API_KEY
from tests.support.mollie_api import running_mollie_api, stand_in_keys
from tests.support.paypal import WEBHOOK_ID as PAYPAL_WEBHOOK_ID
from tests.support.paypal import PayPalKeys, cert_host, key_pem
from tests.support.services import stream_messages, wait_until
from tests.support.settlement import (
    fetch,
    merchant_balance,
    open_merchant,
    running_worker,
    settlement_sections,
)
from tests.support.stripe_objects import API_KEY as STRIPE_API_KEY
from tests.support.stripe_objects import running_stripe_objects
from tests.support.stub import Stub
from tests.support.zarinpal_api import MERCHANT_ID as ZARINPAL_MERCHANT_ID
from tests.support.zarinpal_api import running_zarinpal_api

ADYEN_KEY = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
FORWARD_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MOLLIE_KEY_ENV = "MOLLIE_WALK_KEY"
GOCARDLESS_KEY_ENV = "GOCARDLESS_WALK_KEY"
STRIPE_KEY_ENV = "STRIPE_THIN_WALK_KEY"
ZARINPAL_KEY_ENV = "ZARINPAL_WALK_MERCHANT"
IYZICO_KEY_ENV = "IYZICO_WALK_KEY"
ZARINPAL_AUTHORITY = "A0000000000000000000000000000000WALK"
#: The environment the config's `*_env` keys name.
ENV = {MOLLIE_KEY_ENV: MOLLIE_API_KEY, GOCARDLESS_KEY_ENV: GOCARDLESS_API_KEY,
       STRIPE_KEY_ENV: STRIPE_API_KEY, ZARINPAL_KEY_ENV: ZARINPAL_MERCHANT_ID,
       IYZICO_KEY_ENV: IYZICO_API_KEY}  # fmt: skip


@dataclass(frozen=True)
class Sample:
    """One provider's walk: its settings, a body, what the gateway must read from it,
    and, for a payment provider, the capture it must settle (1000 USD)."""

    settings: dict[str, Any]
    body: dict[str, Any]
    event_id: str
    event_type: str
    merchant: str | None = None
    sign_args: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    #: The body as sent, for a provider whose body is not JSON (`body` is then unused).
    raw: bytes | None = None
    #: A confirmed provider's: the (id, type) of the event the confirm stage records
    #: from its API's answer, the one published, settled and forwarded; the webhook
    #: itself (`event_id`, `event_type`) is recorded only.
    confirmed: tuple[str, str] | None = None

    @property
    def published(self) -> tuple[str, str]:
        """The (id, type) of the event that reaches the stream."""
        return self.confirmed or (self.event_id, self.event_type)


def m(name: str) -> str:
    return f"m_walk_{name}"


SAMPLES: dict[str, Sample] = {
    "stripe": Sample(
        {"secrets": ["whsec_walk"]},
        {"id": "evt_walk", "type": "payment_intent.succeeded",
         "data": {"object": {"id": "pi_walk", "amount_received": 1000, "currency": "usd",
                             "metadata": {"merchant_id": m("stripe")}}}},
        "evt_walk", "payment_intent.succeeded", m("stripe"),
    ),
    # A thin notification: its payment intent is fetched from the stand-in API (the walk).
    "stripe_thin": Sample(
        {"secrets": ["whsec_walk_thin"], "api_key_env": STRIPE_KEY_ENV},
        {"id": "evt_walk_thin", "object": "v2.core.event",
         "type": "v1.payment_intent.succeeded", "created": "2026-12-06T00:00:00.000Z",
         "livemode": False, "context": None,
         "related_object": {"id": "pi_walk_thin", "type": "payment_intent",
                            "url": "/v1/payment_intents/pi_walk_thin"}},
        "evt_walk_thin", "v1.payment_intent.succeeded", m("stripe_thin"),
        confirmed=("evt_walk_thin:confirmed", "payment_intent.succeeded"),
    ),
    "paddle": Sample(
        {"secrets": ["pdl_walk"]},
        {"event_id": "evt_walk", "event_type": "transaction.completed",
         "data": {"id": "txn_walk", "status": "completed", "currency_code": "USD",
                  "custom_data": {"merchant_id": m("paddle")},
                  "details": {"totals": {"grand_total": "1000", "currency_code": "USD"}}}},
        "evt_walk", "transaction.completed", m("paddle"),
    ),
    "razorpay": Sample(
        {"secrets": ["rzp_walk"]},
        {"entity": "event", "event": "payment.captured",
         "payload": {"payment": {"entity": {"id": "pay_walkrzp", "amount": 1000, "currency": "USD",
                                            "notes": {"merchant_id": m("razorpay")}}}}},
        "evt_walk", "payment.captured", m("razorpay"), ("--event-id", "evt_walk"),
    ),
    "adyen": Sample(
        {"secrets": [ADYEN_KEY]},
        {"live": "false", "notificationItems": [{"NotificationRequestItem": {
            "pspReference": "PSPWALK2", "originalReference": "PSPWALK1",
            "merchantAccountCode": m("adyen"), "merchantReference": "walk",
            "amount": {"value": 1000, "currency": "USD"}, "eventCode": "CAPTURE",
            "success": "true", "additionalData": {}}}]},
        "PSPWALK2:CAPTURE:true", "CAPTURE", m("adyen"),
    ),
    "checkout": Sample(
        {"secrets": ["cko_walk"]},
        {"id": "evt_walk", "type": "payment_captured",
         "data": {"id": "pay_walk", "action_id": "act_walk", "amount": 1000, "currency": "USD",
                  "metadata": {"merchant_id": m("checkout")}}},
        "evt_walk", "payment_captured", m("checkout"),
    ),
    "square": Sample(
        {"secrets": ["sq_walk"], "notification_url": "https://gateway.example/webhooks/square"},
        {"merchant_id": m("square"), "type": "payment.updated", "event_id": "evt_walk",
         "data": {"type": "payment", "id": "sq_pay_walk", "object": {"payment": {
             "id": "sq_pay_walk", "status": "COMPLETED",
             "amount_money": {"amount": 1000, "currency": "USD"},
             "total_money": {"amount": 1000, "currency": "USD"}}}}},
        "evt_walk", "payment.updated", m("square"),
    ),
    "paystack": Sample(
        {"secrets": ["sk_test_walk"]},
        {"event": "charge.success",
         "data": {"id": 4242, "reference": "ref_walk", "amount": 1000, "currency": "USD",
                  "status": "success", "metadata": {"merchant_id": m("paystack")}}},
        "charge.success:4242", "charge.success", m("paystack"),
    ),
    "braintree": Sample(
        {"secrets": ["walk_public:walk_private"]}, {},
        "transaction_settled:bt_txn_walk:2026-12-06T00:00:00Z", "transaction_settled",
        m("braintree"),
        raw=(b'<notification><timestamp type="datetime">2026-12-06T00:00:00Z</timestamp>'
             b"<kind>transaction_settled</kind><subject><transaction><id>bt_txn_walk</id>"
             b"<status>settled</status><type>sale</type><currency-iso-code>USD"
             b"</currency-iso-code><amount>10.00</amount><merchant-account-id>"
             + m("braintree").encode() + b"</merchant-account-id></transaction></subject>"
             b"</notification>"),
    ),
    # GoCardless's events carry no amount: recorded, published and forwarded, not settled.
    # Its payment's amount is fetched from the stand-in API (the walk).
    "gocardless": Sample(
        {"secrets": ["gc_walk"], "api_key_env": GOCARDLESS_KEY_ENV},
        {"events": [{"id": "EV0WALK0000001", "resource_type": "payments",
                     "action": "confirmed", "links": {"payment": "PM0WALK0000001"}}],
         "meta": {"webhook_id": "WB0WALK0000001"}},
        "EV0WALK0000001", "payments.confirmed", m("gocardless"),
        confirmed=("EV0WALK0000001:confirmed", "payments.confirmed"),
    ),
    # Signed with the test CA's key; the stand-in certificate host is added in the walk.
    "paypal": Sample(
        {"webhook_id": PAYPAL_WEBHOOK_ID},
        {"id": "WH-WALK", "event_type": "PAYMENT.CAPTURE.COMPLETED",
         "resource": {"id": "pp_capture_walk", "amount": {"currency_code": "USD", "value": "10.00"},
                      "payee": {"merchant_id": m("paypal")}}},
        "WH-WALK", "PAYMENT.CAPTURE.COMPLETED", m("paypal"),
    ),
    "standard": Sample(
        {"secrets": [FORWARD_SECRET]},
        {"type": "invoice.paid", "data": {}},
        "msg_walk", "invoice.paid", sign_args=("--event-id", "msg_walk"),
    ),
    "github": Sample(
        {"secrets": ["gh_walk"]}, {"action": "opened"}, "d_walk", "issues",
        sign_args=("--event-id", "d_walk", "--event-type", "issues"),
    ),
    "shopify": Sample(
        {"secrets": ["shp_walk"]}, {"id": 1}, "w_walk", "orders/create",
        sign_args=("--event-id", "w_walk", "--event-type", "orders/create"),
    ),
    "hmac": Sample(
        {"secrets": ["00ff00ff"], "header": "X-Walk-Signature", "algorithm": "sha512",
         "key_encoding": "hex", "signed": "url+body",
         "notification_url": "https://gateway.example/webhooks/hmac",
         "event_id_from": "json:/meta/id", "event_type_from": "json:/meta/type"},
        {"meta": {"id": "walk-1", "type": "thing.done"}},
        "walk-1", "thing.done",
    ),
    # Unsigned: the form names a payment, which the stand-in API answers paid (the walk).
    "mollie": Sample(
        {"api_key_env": MOLLIE_KEY_ENV}, {}, "tr_walk", "payment.webhook", m("mollie"),
        raw=b"id=tr_walk", confirmed=("tr_walk:paid", "payment.paid"),
    ),
    # Mollie's next-gen webhooks: signed, recorded, published and forwarded, never settled
    # (the classic `mollie` provider settles Mollie's payments).
    "mollie_events": Sample(
        {"secrets": ["mollie_walk"]},
        {"resource": "event", "id": "event_walk", "type": "payment-link.paid",
         "entityId": "pl_walk", "createdAt": "2026-12-06T00:00:00.0Z", "_links": {}},
        "event_walk", "payment-link.paid",
    ),
    # iyzico's notification names a payment and no amount: the payment's detail is
    # fetched (signed per request) from the stand-in API, its answer's signature checked.
    "iyzico": Sample(
        {"secrets": [IYZICO_SECRET_KEY], "api_key_env": IYZICO_KEY_ENV,
         "merchant_id": m("iyzico")},
        {"paymentConversationId": "conv-walk", "merchantId": 3382172,
         "paymentId": 41000001, "status": "SUCCESS", "iyziReferenceCode": "ref-walk-1",
         "iyziEventType": "API_AUTH", "iyziEventTime": 1796000000000,
         "iyziPaymentId": 41000001},
        "ref-walk-1", "API_AUTH", m("iyzico"), confirmed=("41000001:paid", "payment.paid"),
    ),
    # PayTR's form callback, signed in the form (`hash`); its merchant fixed by the
    # configuration, as a PayTR store's callbacks name none.
    "paytr": Sample(
        {"secrets": ["walkKey:walkSalt"], "merchant_id": m("paytr")}, {},
        "PAYTRWALK1:success", "success", m("paytr"),
        raw=b"merchant_oid=PAYTRWALK1&status=success&total_amount=1000&currency=USD",
    ),
    "nowpayments": Sample(
        {"secrets": ["np_walk"], "merchant": ["/order_id"]},
        {"payment_id": 5077125051, "payment_status": "finished", "pay_address": "TNDFki",
         "price_amount": 10, "price_currency": "usd", "pay_amount": 10, "actually_paid": 10,
         "pay_currency": "usd", "order_id": m("nowpayments")},
        "5077125051:finished", "finished", m("nowpayments"),
    ),
    # Zarinpal's callback (posted here as a webhook would be; a browser brings it with a
    # GET), its order signed in the query; Zarinpal's verify is stood in by a local API.
    # 10,000,000 rials at the walk's USD/IRR of 1,000,000 are its 10 USD.
    "zarinpal": Sample(
        {"secrets": ["zp_walk"], "return_url": "https://shop.example/done",
         "api_key_env": ZARINPAL_KEY_ENV}, {},
        f"{ZARINPAL_AUTHORITY}:order:o_walk", "callback.ok", m("zarinpal"),
        raw=(b"order=o_walk&amount=10000000&currency=IRR&merchant=" + m("zarinpal").encode()
             + b"&Authority=" + ZARINPAL_AUTHORITY.encode() + b"&Status=OK"),
        confirmed=(f"{ZARINPAL_AUTHORITY}:verified", "payment.verified"),
    ),
}  # fmt: skip


def test_every_registered_provider_has_a_walk() -> None:
    """A provider added to the registry must be walked (add its sample above)."""
    assert set(SAMPLES) == set(PROVIDERS), "providers without a walk: " + ", ".join(
        sorted(set(PROVIDERS) - set(SAMPLES))
    )
    for name, sample in SAMPLES.items():
        confirms = PROVIDERS[name].confirmation is not None
        assert (sample.confirmed is not None) == confirms, f"{name}: confirmed is for {confirms}"
        if confirms:  # walked with an API, so the confirm stage fetches
            assert "api_key_env" in sample.settings, name


def sign(name: str, config_path: Path, body_path: Path) -> tuple[dict[str, str], bytes]:
    """`gateway sign --provider NAME`: the headers, and the body as signed."""
    out = io.StringIO()
    with redirect_stdout(out):
        status = gateway_main(["sign", "--provider", name, "--config", str(config_path),
                               "--body", str(body_path), "--json",
                               *SAMPLES[name].sign_args])  # fmt: skip
    assert status == 0, f"{name}: gateway sign exited {status}"
    answer = json.loads(out.getvalue())
    body = answer["body"].encode() if "body" in answer else body_path.read_bytes()
    return answer["headers"], body


@pytest.fixture
def paypal_walk(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """PayPal's certificate host stood in by a local one, and `gateway sign`'s key."""
    keys = PayPalKeys()
    with cert_host(keys, tmp_path) as host:
        yield {
            "secrets": [key_pem(keys.key)],
            "signing_cert_url": host.url(),
            "cert_extra_hosts": [host.host],
            "cert_extra_ca_file": str(host.ca_file),
        }


@pytest.fixture
async def mollie_walk() -> AsyncIterator[dict[str, Any]]:
    """Mollie's API stood in by a local one, where the walk's payment is paid."""
    async with running_mollie_api() as api:
        api.pay("tr_walk", "10.00", "USD", metadata={"merchant_id": m("mollie")})
        yield stand_in_keys(api.url, MOLLIE_KEY_ENV)


@pytest.fixture
async def gocardless_walk() -> AsyncIterator[dict[str, Any]]:
    """GoCardless's API stood in by a local one, where the walk's payment is."""
    async with running_gocardless_api() as api:
        api.payment("PM0WALK0000001", 1000, "USD", m("gocardless"))
        yield stand_in_keys(api.url, GOCARDLESS_KEY_ENV)


@pytest.fixture
async def iyzico_walk() -> AsyncIterator[dict[str, Any]]:
    """iyzico's API stood in by a local one, where the walk's payment is paid (in USD,
    which iyzico also takes)."""
    async with running_iyzico_api() as api:
        api.pay("41000001", "10.00", currency="USD", conversation_id="conv-walk")
        yield stand_in_keys(api.url, IYZICO_KEY_ENV)


@pytest.fixture
async def zarinpal_walk() -> AsyncIterator[dict[str, Any]]:
    """Zarinpal's API stood in by a local one, where the walk's payment is paid."""
    order = {"order": "o_walk", "amount": "10000000", "currency": "IRR",
             "merchant": m("zarinpal")}  # fmt: skip
    signed = {**order, "sig": order_signature("zp_walk", order)}
    async with running_zarinpal_api() as api:
        # Zarinpal's list of payments paid and not verified holds it, with the callback
        # URL its order was signed into (what vouches for the Authority's order).
        api.pay(ZARINPAL_AUTHORITY, 10_000_000,
                f"https://gateway.example/callbacks/zarinpal?{urlencode(signed)}")  # fmt: skip
        yield stand_in_keys(api.url, ZARINPAL_KEY_ENV)


@pytest.fixture
async def stripe_thin_walk() -> AsyncIterator[dict[str, Any]]:
    """Stripe's object API stood in by a local one, where the walk's intent is."""
    async with running_stripe_objects() as api:
        api.put("payment_intents", {
            "id": "pi_walk_thin", "object": "payment_intent", "amount_received": 1000,
            "currency": "usd", "metadata": {"merchant_id": m("stripe_thin")},
        })  # fmt: skip
        yield stand_in_keys(api.url, STRIPE_KEY_ENV)


async def test_every_provider_is_signed_verified_recorded_settled_and_forwarded(
    database_url: str,
    nats_url: str,
    stub: Stub,
    redis_url: str,
    tmp_path: Path,
    paypal_walk: dict[str, Any],
    mollie_walk: dict[str, Any],
    gocardless_walk: dict[str, Any],
    stripe_thin_walk: dict[str, Any],
    zarinpal_walk: dict[str, Any],
    iyzico_walk: dict[str, Any],
) -> None:
    await stub.control(rates={"USD/IRR": "1000000"})  # Zarinpal's rials
    doc = config(database_url, nats_url, **settlement_sections(stub.url, redis_url))
    doc["providers"] = {name: {"scheme": name, **s.settings} for name, s in SAMPLES.items()}
    doc["providers"]["paypal"].update(paypal_walk)
    doc["providers"]["mollie"].update(mollie_walk)
    doc["providers"]["gocardless"].update(gocardless_walk)
    doc["providers"]["stripe_thin"].update(stripe_thin_walk)
    doc["providers"]["zarinpal"].update(zarinpal_walk)
    doc["providers"]["iyzico"].update(iyzico_walk)
    doc["confirm"] = QUICK
    config_path = write_toml(tmp_path / "gateway.toml", doc)
    settling = {name: s for name, s in SAMPLES.items() if PROVIDERS[name].movements}
    async with (
        serving(doc, ENV) as server,
        running_worker(doc, ENV) as parts,
        confirming(doc, ENV),
    ):
        for s in settling.values():
            assert s.merchant is not None
            await open_merchant(parts, s.merchant)
        for name, sample in SAMPLES.items():
            body_path = tmp_path / f"{name}.json"
            body_path.write_bytes(sample.raw or orjson.dumps(sample.body))
            headers, body = sign(name, config_path, body_path)
            answer = await server.client.post(
                f"/webhooks/{name}", content=body,
                headers={"Content-Type": "application/json", **headers},
            )  # fmt: skip
            assert answer.status_code == 200, f"{name}: {answer.status_code} {answer.text}"

        async def all_settled() -> bool:
            sql = "SELECT count(*) AS n FROM settlements WHERE state = 'settled'"
            found = await fetch(database_url, sql)
            return int(found[0]["n"]) >= len(settling)

        await wait_until(all_settled)  # a confirmed provider's event is recorded by now
        rows = await fetch(database_url, "SELECT provider, event_id, event_type, subject"
                           " FROM processed_webhooks")  # fmt: skip
        # (provider, id, type, published): a confirmed provider's webhook is not.
        recorded = {(r["provider"], r["event_id"], r["event_type"], r["subject"] is not None)
                    for r in rows}  # fmt: skip
        expected = {(n, *s.published, True) for n, s in SAMPLES.items()}
        expected |= {(n, s.event_id, s.event_type, False) for n, s in SAMPLES.items()
                     if s.confirmed is not None}  # fmt: skip
        assert recorded == expected
        for name, s in settling.items():
            assert await merchant_balance(parts, str(s.merchant)) == 1000, name
        assert await fetch(database_url, "SELECT event_id FROM dlq_webhooks") == []

    messages = await stream_messages(nats_url)
    published = {msg[1]["Nats-Msg-Id"]: msg[2] for msg in messages}
    for name, sample in SAMPLES.items():
        event_id, event_type = sample.published
        stored = published[f"{name}:{event_id}"]
        event = ForwardedEvent(name, event_id, event_type, "2026-12-06T00:00:00Z", stored)
        resign = ResignAs(name) if name in {r.value for r in ResignAs} else ResignAs.STANDARD
        secrets = tuple(SAMPLES[name].settings["secrets"]) if resign.value == name else (
            FORWARD_SECRET,)  # fmt: skip
        body, headers = delivery_request(event, 1, 1_765_000_000, resign_as=resign,
                                         secrets=secrets)  # fmt: skip
        assert body == stored, name
        lowered = {k.lower(): v for k, v in headers.items()}
        get_scheme(resign.value).verify(SchemeParams(secrets=secrets), lowered, body,
                                        1_765_000_000)  # fmt: skip


def test_resign_targets_are_the_providers_that_say_so() -> None:
    """`gateway forward --resign-as` offers exactly the providers declared `resign`."""
    assert {r.value for r in ResignAs} == {n for n, p in PROVIDERS.items() if p.resign}


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_every_provider_is_documented(name: str) -> None:
    """Its row in docs/providers.md's table of every provider, and a section."""
    page = (Path(__file__).parents[3] / "docs" / "providers.md").read_text(encoding="utf-8")
    table = page.split("## Every provider", 1)[1].split("\n## ", 1)[0]
    assert f"| `{name}` |" in table
